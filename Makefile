# The two commands of the README's Quick start: `make run` and `make test`.
# Paths are anchored to this file, so `make -f path/to/Makefile run` serves from any
# directory, keeping its data in that directory's var/ (the tests do that).
ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
PYTHON ?= python3
VENV ?= $(ROOT)/.venv
PORT ?= 17890
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
STAMP_DOCS := $(VENV)/.installed-docs
BENCH_ARGS ?=
# the commit bench-check sets this tree against: the previous release (CHANGELOG.md)
BENCH_BASE ?= ec7cb31
SOAK_ARGS ?=
PROFILE_ARGS ?=

.PHONY: room installs run test lint check unit bench bench-check profile soak soak-cluster clean chromium prometheus rabbitmq systemd openssl containers kubetools wrk docs redis7 test-redis7 bytecode

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP_RUN): $(BIN)/python $(ROOT)/setup.cfg $(ROOT)/pyproject.toml
	$(BIN)/python -m pip install --quiet -e '$(ROOT)'
	touch $@

# The Python client (clients/python) is a package of its own; the tests use it installed.
# The docs' extra comes in the same install (make test builds the site): one resolve.
$(STAMP_TEST): $(BIN)/python $(ROOT)/setup.cfg $(ROOT)/pyproject.toml $(ROOT)/clients/python/pyproject.toml
	$(BIN)/python -m pip install --quiet -e '$(ROOT)[dev,spark,docs]' -e '$(ROOT)/clients/python'
	touch $@ $(STAMP_RUN) $(STAMP_DOCS)

# make test's free space, checked before anything is installed: its two virtualenvs
# (about 2 GB), the test data under var/ and the system's temporary folder, and the
# container image (about 0.5 GB). A machine short of it failed part way through pip's
# install with ENOSPC; it now fails first, with one line.
TEST_SPACE_MB ?= 3072
room:
	@for d in $(ROOT) $${TMPDIR:-/tmp}; do \
	  [ -d "$$d" ] || { echo "make test's temporary folder $$d (TMPDIR) does not exist: create it, or unset TMPDIR"; exit 1; }; \
	  free=$$(df -Pk "$$d" | awk 'NR == 2 {print int($$4 / 1024)}'); \
	  [ "$${free:-0}" -ge $(TEST_SPACE_MB) ] || \
	  { echo "make test needs about $(TEST_SPACE_MB) MB free in $$d (it has $${free:-0} MB): free some space there, or set TMPDIR to a folder with room"; exit 1; }; \
	done

# make test's two virtualenvs at once, the test one and the manifests' tools (each about
# 30 s of a fresh clone's install, mostly waiting on the index and the disk): a sub-make
# on two jobs, each writing only its own venv
installs:
	@$(MAKE) --no-print-directory -f $(ROOT)/Makefile -j2 $(STAMP_TEST) $(KUBETOOLS)/.installed

# exec: busbar dev becomes make's own child instead of a shell's, so the SIGTERM that make
# passes on when it is stopped (by an IDE, `timeout`, a supervisor) reaches busbar dev,
# which then stops web, worker and Redis in order; through a shell it was lost.
run: $(STAMP_RUN)
	@PORT=$(PORT) exec $(BIN)/busbar dev

# mypy over the code that ships and the benchmarks (spec/ is not checked yet)
lint: $(STAMP_TEST)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy app workers jobs config dev busbar spark bench

# The console's browser tests drive Debian's chromium (Playwright's own browser download
# is not used): installed here when missing and possible, else one line says what to do.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing chromium for the console's browser tests (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	{ echo "make test needs Chromium for the console's browser tests: install it (Debian/Ubuntu: sudo apt-get install chromium), or put chromium on PATH"; exit 1; }

# The RabbitMQ destinations' tests run Debian's rabbitmq-server as a throwaway node of
# their own (spec/rabbitmq_server.py): installed here when missing and possible, else one
# line says what to do. apt's own start of the system service is refused where no init
# runs, and the tests never use it.
rabbitmq:
	@[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing rabbitmq-server for the RabbitMQ destinations' tests (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null; } || \
	{ echo "make test needs RabbitMQ for the destinations' tests: install it (Debian/Ubuntu: sudo apt-get install rabbitmq-server)"; exit 1; }

# The alert rules' tests (promtool, in make check too) and the alerts' and dashboard's
# test (a real server scraping a real busbar web) run Debian's prometheus: installed here
# when missing and possible, else one line says what to do.
prometheus:
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing prometheus for the alert rules' tests (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || \
	{ echo "make check and make test need Prometheus for the alert rules' tests: install it (Debian/Ubuntu: sudo apt-get install prometheus), or put prometheus and promtool on PATH"; exit 1; }

# The systemd units' test (spec/deploy/test_systemd.py) runs systemd-analyze: installed
# here when missing and possible (Debian's systemd, which does not have to be the init),
# else one line says what to do.
systemd:
	@command -v systemd-analyze >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing systemd for the systemd units' test (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; } || \
	{ echo "make check and make test need systemd-analyze for the systemd units' test: install it (Debian/Ubuntu: sudo apt-get install systemd), or put systemd-analyze on PATH"; exit 1; }

# The CA bundle and client certificate tests make their certificates with the openssl
# command: installed here when missing and possible, else one line says what to do.
openssl:
	@command -v openssl >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing openssl for the certificate tests (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null; } || \
	{ echo "make check and make test need the openssl command for the certificate tests: install it (Debian/Ubuntu: sudo apt-get install openssl), or put openssl on PATH"; exit 1; }

# The Kubernetes manifests' checks (spec/deploy/test_kubernetes.py) run
# kubernetes-validate, yamllint and checkov (deploy/kubernetes/tools.txt) from a
# virtualenv of their own under var/: checkov pins dozens of packages, which must not
# move busbar's own. Installed from the package index on first use.
KUBETOOLS := $(ROOT)/var/kubetools
$(KUBETOOLS)/.installed: $(ROOT)/deploy/kubernetes/tools.txt
	@rm -rf $(KUBETOOLS) && $(PYTHON) -m venv $(KUBETOOLS) && \
	$(KUBETOOLS)/bin/python -m pip install --quiet --disable-pip-version-check -r $< || \
	{ echo "make test needs the tools in deploy/kubernetes/tools.txt for the Kubernetes manifests' checks, from the package index: reach it, or install them into $(KUBETOOLS) by hand"; exit 1; }
	@touch $@

# kubectl renders the kustomize base and overlays (`kubectl kustomize`, no cluster): 1.21
# or newer, whose kustomize reads `resources` and `patches` (Debian's kubernetes-client,
# 1.20, is too old), so it is named, not installed.
kubetools: $(KUBETOOLS)/.installed
	@command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1 || \
	{ echo "make test needs kubectl 1.21 or newer to render the Kubernetes overlays (kubectl kustomize): install it from https://kubernetes.io/docs/tasks/tools/"; exit 1; }

# The image's test builds the Containerfile and runs compose.yaml's services with Debian's
# podman (the runc runtime, a pod on slirp4netns) on a base made by debootstrap: installed
# here when missing and possible, else one line says what to do.
CONTAINER_TOOLS := podman runc catatonit slirp4netns debootstrap
containers:
	@missing=""; for t in $(CONTAINER_TOOLS); do command -v $$t >/dev/null 2>&1 || PATH=$$PATH:/usr/sbin:/sbin command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -z "$$missing" ] || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing$$missing for the container image's test (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(CONTAINER_TOOLS) >/dev/null; } || \
	{ echo "make test needs$$missing for the container image's test: install them (Debian/Ubuntu: sudo apt-get install $(CONTAINER_TOOLS))"; exit 1; }

# The documentation site (mkdocs.yml) into var/site, strictly: a broken link, anchor or
# nav entry fails the build. docs/hooks/ render the API page from GET /openapi.json.
$(STAMP_DOCS): $(BIN)/python $(ROOT)/setup.cfg $(ROOT)/pyproject.toml
	$(BIN)/python -m pip install --quiet -e '$(ROOT)[docs]'
	touch $@

# docs/console.png is taken again (a seeded bus, chromium: two minutes) only when the
# console changed since it was taken (spec/console_picture.py); a no-op otherwise.
docs: $(STAMP_DOCS) $(STAMP_TEST) chromium
	cd $(ROOT) && $(BIN)/python -m spec.integration.screenshot docs/console.png --if-stale
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -f $(ROOT)/mkdocs.yml

# The suite on TEST_PROCESSES processes (pytest-xdist; each starts its own Redis, and its
# own cluster on first use; the tests that start a JVM in one group, one after another:
# spec/conftest.py), with the 40 slowest named, then the tests marked `alone` one at a
# time: they assert a latency or a stand-still, which the others' load would be part of.
# Coverage is that of the test processes (the busbar processes the integration tests
# start are not traced).
TEST_PROCESSES ?= 4
COVERAGE := --cov=app --cov=workers --cov=jobs --cov=config --cov=dev --cov=busbar --cov=spark
REPORT := --cov-report=term:skip-covered --cov-report=html:$(ROOT)/var/coverage
PYTEST := $(BIN)/python -m pytest
ON_EMBEDDED := BUSBAR_REDIS_SERVER=embedded $(PYTEST)
ON_REDIS7 := BUSBAR_REDIS_SERVER=redis-server $(PYTEST) -q -p no:cacheprovider --server-only
REST := -m "not alone and not failover"
# --dist loadgroup on make test's parallel runs: besides keeping a group together, it
# hands out one test at a time; xdist's default hands out chunks of consecutive tests,
# which gave the Redis 7 run's four 14 s fencing tests to one process (74 s where 59 s
# do now). make unit's short tests are quicker in chunks (67 s, against 74 one by one).
#
# The files that hold the tests marked `alone` and `failover`: their stages collect these
# alone, not the 2,000 tests of spec/ (8 s a stage); spec/test_make_stages.py holds
# every such test to be in them
ALONE_SUITES := $(addprefix $(ROOT)/,spec/app/delivery/test_origin_adapts.py spec/app/models/test_replicas_cluster.py spec/integration/test_faults_backoff.py spec/integration/test_transforms.py spec/integration/test_slow_clients.py spec/integration/test_web_turns.py)
FAILOVER_SUITES := $(ROOT)/spec/integration/test_cluster_failover.py

# The suite runs on the embedded Valkey whatever the machine has on PATH
# (BUSBAR_REDIS_SERVER, dev/redis_server.py); then the suites that depend on the server's
# semantics run on Debian's Redis 7.0 as well (as test-redis7 runs them), their tests
# that talk to a server (--server-only, spec/conftest.py: the rest, pure logic and
# fakeredis, would run there as they ran on the embedded server). Last, the
# failover tests (marked `failover`: they mostly wait out a cluster's failovers, a core
# at most between them) run on both servers side by side, Redis 7's output printed
# after; the coverage report comes with them. Redis 7's alone stage runs the alone
# files within REDIS7_SUITES (`$(filter ...)`: each suite as a prefix).
test: room installs lint docs chromium prometheus rabbitmq systemd openssl containers kubetools redis7 bytecode
	$(ON_EMBEDDED) -n $(TEST_PROCESSES) --dist loadgroup --durations=40 $(REST) $(COVERAGE) --cov-report=
	$(ON_EMBEDDED) -m alone $(COVERAGE) --cov-append --cov-report= $(ALONE_SUITES)
	$(ON_REDIS7) -n $(TEST_PROCESSES) --dist loadgroup $(REST) $(REDIS7_SUITES)
	$(ON_REDIS7) -m alone $(filter $(REDIS7_SUITES:%=%%),$(ALONE_SUITES))
	@mkdir -p $(ROOT)/var; log=$(ROOT)/var/failover-redis7.log; \
	$(ON_REDIS7) -m failover $(FAILOVER_SUITES) > $$log 2>&1 & beside=$$!; \
	$(ON_EMBEDDED) -m failover $(COVERAGE) --cov-append $(REPORT) $(FAILOVER_SUITES); here=$$?; \
	wait $$beside; there=$$?; echo "the failover tests on Redis 7 (beside the above):"; \
	cat $$log; [ $$here = 0 ] && [ $$there = 0 ]

# Every busbar process a test starts (about a thousand in make test) imports busbar's
# modules: compiled once here, or each would compile them again where
# PYTHONDONTWRITEBYTECODE is set (it stops Python writing .pyc files, not reading
# them): about 70 ms of CPU a process.
bytecode: $(STAMP_TEST)
	@$(BIN)/python -m compileall -q -j 0 $(addprefix $(ROOT)/,app workers jobs config dev busbar spark spec clients/python)

# Most users run Redis 7.x: the Lua scripts, the job state machine, the models (durable
# writes on a cluster included), the delivery core, fencing and the failover suite run on
# Debian's redis-server 7.0 too. Installed here when missing and possible (root, apt-get),
# else one line says what to install.
REDIS7_SUITES := $(addprefix $(ROOT)/spec/,app/lua app/models app/delivery app/services integration/test_fencing.py integration/test_cluster_failover.py)
redis7:
	@command -v redis-server >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing redis-server (Redis 7) for make test-redis7 (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	{ echo "make test needs Debian's redis-server (Redis 7) for the suites run on it: install it (Debian/Ubuntu: sudo apt-get install redis-server), or put redis-server on PATH"; exit 1; }

test-redis7: $(STAMP_TEST) redis7 bytecode
	$(ON_REDIS7) -n $(TEST_PROCESSES) --dist loadgroup $(REST) $(REDIS7_SUITES)
	$(ON_REDIS7) -m "alone or failover" $(REDIS7_SUITES)

# The quick loop while working: lint, mypy and the tests that start no busbar process,
# JVM, browser or cluster (spec/integration and the Spark session left out), on four
# processes (they wait on Redis and sockets as much as they compute: on two cores, 124 s
# on two processes, 96 s on three, 88 s on four; make test runs them four at a time
# too), the property tests drawing a third of their examples (spec/budget.py; make
# test draws them all). The pre-commit hook runs the same (.pre-commit-config.yaml).
# Some of those tests run a command of the machine's (promtool, systemd-analyze,
# openssl): unit installs them as make test does (spec/test_check_tools.py). The
# `alone` tests (a latency or a stand-still time, which make test runs one at a time)
# are left to make test: beside three other test processes they fail for the load.
check: lint unit

unit: $(STAMP_TEST) prometheus rabbitmq systemd openssl kubetools
	BUSBAR_TEST_QUICK=1 $(BIN)/python -m pytest -n 4 -q spec --ignore=spec/integration -m "not jvm and not alone"

# bench.publish drives its loads with wrk as well as Python threads (see bench/wrk.py):
# installed here when missing and possible, else one line says what to do.
wrk:
	@command -v wrk >/dev/null 2>&1 || \
	{ [ "$$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing wrk for bench.publish (apt-get)" && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; } || \
	{ echo "make bench needs wrk, the HTTP load generator: install it (Debian/Ubuntu: sudo apt-get install wrk; macOS: brew install wrk), or put wrk on PATH"; exit 1; }

bench: $(STAMP_TEST) wrk
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The publish path (bench.publish's loads) and the delivery engine (bench.serial,
# bench.fanout, bench.keys), short, against BENCH_BASE in the same run, the two taking
# turns (bench/check.py): fails, one line a figure, on a regression beyond the noise
# the run measures. Run it before every stop that touches web, app/services or
# app/delivery; about 5-10 minutes.
bench-check: $(STAMP_TEST) wrk
	$(BIN)/python -m bench.check --base $(BENCH_BASE)

# Where the time goes (issue 54): py-spy (the dev extra) on the worker under bench.fanout
# and bench.keys and on web under bench.publish (bench/profile.py); flame graphs into
# docs/img/profile-*.svg, the samples into var/profile/, the largest costs printed. About
# 6 minutes; py-spy attaches by pid, which takes root (or kernel.yama.ptrace_scope 0).
profile: $(STAMP_TEST) wrk
	$(BIN)/python -m bench.profile $(PROFILE_ARGS)

# The whole bus under random faults for minutes (bench/soak.py); fails on a lost event.
soak: $(STAMP_TEST)
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

# The same on a Redis Cluster, with failovers and network partitions (as root: it makes
# network namespaces); `make soak-cluster SOAK_ARGS=--quick` for the short one.
soak-cluster: $(STAMP_TEST)
	$(BIN)/python -m bench.soak --cluster $(SOAK_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache

"""busbar as an operator installs it: `python -m build` makes an sdist and a wheel (the
wheel built from the sdist, so the sdist is complete), the wheel goes into a fresh
virtualenv outside the checkout, and the installed console script runs web, worker,
dev, config and the lake's ingest, with the Python client installed from its own
wheel. A checkout hides what an install lacks: `busbar web` once failed installed
(`No module named 'packaging'`) while `make run` worked (docs/deploying.md)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events, queued
from spec.integration.processes import busbar_env, free_port, package_version, running, wait_until
from spec.integration.subscriber import serving

pq = pytest.importorskip("pyarrow.parquet")
# what is installed is the same whatever the layout: the bus's tests run on both
pytestmark = pytest.mark.layout_free

INGEST = ["spark", "ingest", "--output", "lake", "--checkpoint", "lake/cp", "--available-now"]
ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = (".git", ".venv", "var", "site", "build", "dist", "spec", "bench", "*.egg-info")


def run(args: list[str | Path], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """Nothing that points back into the checkout."""
    env = busbar_env(**extra)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ of a fresh virtualenv holding busbar[spark] and busbar-client, each
    installed from the wheel `python -m build` made of a copy of this tree (a build
    writes into the tree it builds; the checkout stays as it is). Made once per run
    and shared by the test processes (a lock file beside it): one of the tests runs
    in the jvm group's process (spec/conftest.py), the others wherever xdist puts them,
    and the build, about 80 s, need not hold up the JVM tests, which run one at a time."""
    work = shared_dir(tmp_path_factory)
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (work / "installed").exists():
            build(work)
            (work / "installed").touch()
    return work / "venv" / "bin"


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """The same directory for every test process of this run, and only of this run."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = factory.getbasetemp()
    return base.parent / f"package-{run}" if run else base / "package"


def build(work: Path) -> None:
    for left in ("source", "dist", "venv"):  # a build a killed process left half done
        shutil.rmtree(work / left, ignore_errors=True)
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT, "__pycache__"))
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source], work)
    client = source / "clients" / "python"
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, client], work)
    (wheel,) = dist.glob("busbar-*.whl")
    (client_wheel,) = dist.glob("busbar_client-*.whl")
    assert len(list(dist.glob("*.tar.gz"))) == 2  # each with its sdist
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv], work)
    pip = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    run([*pip, f"{wheel}[spark]", client_wheel], work, timeout=600)


def test_the_installed_command_is_the_wheels(installed: Path, tmp_path: Path):
    where = run([installed / "python", "-c", "import app, busbar; print(app.__file__)"], tmp_path)
    assert where.startswith(str(installed.parent)), where  # not the checkout's app/
    shown = run([installed / "busbar", "--version"], tmp_path)
    assert shown == f"busbar {package_version()}\n"
    shown = run([installed / "busbar", "config"], tmp_path)
    assert "BUSBAR_REDIS_URL=" in shown


@pytest.mark.slow
def test_installed_web_and_worker_deliver_what_the_installed_client_publishes(
    installed: Path, redis_url: str, tmp_path: Path
):
    with serving() as sub, bus(redis_url, tmp_path, command=[str(installed / "busbar")]) as b:
        b.client("shop")
        b.client("billing")
        b.subscribe("billing", sub.url, ["orders"], max=3, timeout=0)
        publish = (
            "import sys\n"
            "from busbar_client import Busbar, NewEvent\n"
            "shop = Busbar(sys.argv[1], 'shop')\n"
            "shop.publish('orders', [NewEvent('create', f'https://o.test/{i}', {'i': i})"
            " for i in range(3)])\n"
        )
        run([installed / "python", "-c", publish, b.base], tmp_path)
        assert [e["data"]["i"] for e in sub.wait_for(3)] == [0, 1, 2]
        b.publish("shop", "orders", events(2, start=3))  # and by plain HTTP
        assert [e["data"]["i"] for e in sub.wait_for(5)][3:] == [3, 4]


@pytest.mark.slow
@pytest.mark.jvm
@pytest.mark.timeout(600)  # a Spark start on a busy machine
def test_installed_dev_delivers_and_its_ingest_fills_the_lake(installed: Path, tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = clean_env(PORT=str(port))
    log = tmp_path / "dev.log"
    command = [str(installed / "busbar")]
    with serving() as sub, running(["dev"], env, tmp_path, log, command=command):
        wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "busbar dev")
        key = (tmp_path / "var" / "root-key").read_text().strip()
        assert key != ROOT_KEY
        http = requests.Session()
        for name in ("shop", "billing"):
            token = {"name": name, "token": name}
            made = http.post(f"{base}/api_tokens", json=token, auth=(key, ""))
            assert made.status_code == 201, made.text
        route = {"topics": ["orders"], "callback": sub.url, "max": 4, "timeout": 0}
        assert http.post(f"{base}/subscription", json=route, auth=("billing", "")).ok
        sent = http.post(f"{base}/topics/orders", json=events(4), auth=("shop", ""))
        assert sent.status_code == 204, sent.text
        assert len(sub.wait_for(4)) == 4
        # the acknowledgement (and its log entry, what the ingest reads) follows the answer
        wait_until(lambda: queued(base, "billing") == 0, 30, "the acknowledgements")
        done = subprocess.run(
            [str(installed / "busbar"), *INGEST], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("busbar spark ingest: 4 events in "), done.stdout
    assert pq.read_table(tmp_path / "lake" / "events").num_rows == 4

"""The alert rules and the dashboard as an operator deploys them: a real Prometheus
(Debian's) scrapes a real `busbar web` with the root key, loads
deploy/prometheus/busbar.rules.yml as it is, and sees BusbarDeadLetters fire when a
subscriber rejects its batches; every query of deploy/grafana/busbar.json (and its
subscriber variable) returns data from that Prometheus, and every metric the rules and
the dashboard read is one this busbar serves."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import requests

from dev.redis_server import free_port
from spec.conftest import ROOT_KEY
from spec.deploy.prometheus import DASHBOARD, RULES, rules, tool
from spec.integration.bus import Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

pytestmark = [pytest.mark.single_node, pytest.mark.slow]

CONFIG = """
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ["{rules}"]
scrape_configs:
  - job_name: busbar
    basic_auth: {{username: "{key}"}}
    static_configs: [{{targets: ["{target}"]}}]
"""


def start(config: Path, port: int, tmp_path: Path) -> subprocess.Popen:
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [
            tool("prometheus"), f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def query(base: str, expr: str) -> list[dict]:
    answer = requests.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def firing(base: str) -> set[str]:
    alerts = requests.get(f"{base}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


def panel_queries() -> list[str]:
    """The dashboard's queries as Grafana sends them, for every subscriber."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [
        t["expr"].replace("$__rate_interval", "1m").replace("$subscriber", ".*")
        for p in panels
        for t in p["targets"]
    ]


def subscribe_three(b: Bus, urls: dict[str, str]) -> None:
    """billing answers, shipping fails and keeps its events (a backlog: lag), audit
    fails once and its batch is dead-lettered."""
    for name in ("shop", "billing", "shipping", "audit"):
        b.client(name)
    b.subscribe("billing", urls["billing"], ["orders"], max=5, timeout=0)
    b.subscribe("shipping", urls["shipping"], ["orders"], max=5, timeout=0)
    b.subscribe("audit", urls["audit"], ["orders"], max=5, timeout=0, max_attempts=1)


def test_a_real_prometheus_fires_the_rules_and_draws_the_dashboard(
    redis_url: str, tmp_path: Path
) -> None:
    failing = lambda _: (500, 0.0)  # noqa: E731
    subs = {"billing": Subscriber(), "shipping": Subscriber(failing), "audit": Subscriber(failing)}
    with ExitStack() as stack:
        for sub in subs.values():
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(redis_url, tmp_path))
        subscribe_three(b, {name: sub.url for name, sub in subs.items()})
        base = stack.enter_context(prometheus(b.base.removeprefix("http://"), tmp_path))
        assert not firing(base)  # a healthy bus
        for first in (0, 5, 10):  # a delivery or more for billing each second
            b.publish("shop", "orders", events(5, start=first))
            subs["billing"].wait_for(first + 5)
            wait_until(lambda: len(subs["audit"].received) > 0, 30, "audit's attempt")
        wait_until(lambda: "BusbarDeadLetters" in firing(base), 60, "the alert")
        try:
            wait_until(lambda: all(query(base, q) for q in panel_queries()), 30, "data")
        except AssertionError:
            empty = [q for q in panel_queries() if not query(base, q)]
            raise AssertionError(f"dashboard queries without data: {empty}") from None
        assert_dashboard_draws(base)
        assert_only_served_metrics(b)


@contextmanager
def prometheus(target: str, tmp_path: Path) -> Iterator[str]:
    """Debian's Prometheus with busbar's rules, scraping `target` with the root key;
    its base URL once it has scraped busbar web once."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(rules=RULES, key=ROOT_KEY, target=target))
    server = start(config, port, tmp_path)
    try:
        wait_until(lambda: ready(base), 30, "Prometheus to be ready")
        wait_until(lambda: scraped(base), 30, "a first scrape of busbar web")
        yield base
    finally:
        server.terminate()
        server.wait(30)


def ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/-/ready", timeout=2).status_code == 200
    except requests.ConnectionError:
        return False


def scraped(base: str) -> bool:
    return [r["value"][1] for r in query(base, 'up{job="busbar"}')] == ["1"]


def assert_dashboard_draws(base: str) -> None:
    for expr in panel_queries():
        values = [float(r["value"][1]) for r in query(base, expr)]
        assert values and not any(v != v for v in values), (expr, values)  # no NaN
    lag = {r["metric"]["subscriber"] for r in query(base, "busbar:subscriber_lag_seconds")}
    assert "shipping" in lag  # its events wait
    outcomes = query(base, panel_queries()[6])
    assert {"2xx", "5xx"} <= {r["metric"]["outcome"] for r in outcomes}
    variable = json.loads(DASHBOARD.read_text())["templating"]["list"][1]["definition"]
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable).groups()  # type: ignore[union-attr]
    values = requests.get(
        f"{base}/api/v1/label/{label}/values", params={"match[]": metric}, timeout=10
    ).json()["data"]
    assert {"billing", "shipping", "audit"} <= set(values)


def assert_only_served_metrics(b: Bus) -> None:
    text = b.call("GET", "/metrics", ROOT_KEY).text
    served = set(re.findall(r"^(busbar_\w+)", text, re.MULTILINE))
    exprs = [r["expr"] for r in rules()] + panel_queries()
    read = {m for e in exprs for m in re.findall(r"\bbusbar_[a-z_]+", e)}
    assert read - served == set()  # a renamed metric would leave a panel empty

"""Pausing a subscriber, from outside: real web and worker processes and a real
subscriber. A delivery in flight when the pause comes finishes; then nothing is sent
while events keep queuing; on resume every event arrives, once and in order.

Marked `layout_free`: a pause is a flag on the subscriber, read by its own scripts on its
own shard, alike on both layouts. Its Redis part runs on a cluster in the composition
matrix (spec/integration/test_matrix.py: a paused cell at `concurrency` 1 and 4, its ttl
route's events expiring meanwhile), a name's lookup in
spec/integration/test_client_names.py, and a circuit opening in
spec/integration/test_faults_backoff.py."""

from __future__ import annotations

import getpass
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

pytestmark = pytest.mark.layout_free


def test_a_paused_subscriber_gets_nothing_then_everything_in_order(
    redis_url: str, tmp_path: Path
) -> None:
    in_flight = threading.Event()

    def answer(_: object) -> tuple[int, float]:
        if in_flight.is_set():
            return 200, 0.0
        in_flight.set()
        return 200, 1.0  # the first delivery is still under way when the pause comes

    sub = Subscriber(responder=answer)
    with serving(sub), bus(redis_url, tmp_path) as b:
        b.client("pub")
        created = b.call(
            "POST", "/api_tokens", ROOT_KEY, {"name": "ledger", "token": "tok-ledger-1"}
        )
        assert created.status_code == 201
        b.subscribe("tok-ledger-1", sub.url, ["orders"], max=1, timeout=0)
        b.publish("pub", "orders", events(1))
        assert in_flight.wait(30)
        paused = b.call("POST", "/subscriber/pause", "tok-ledger-1")
        assert paused.status_code == 200, paused.text
        state = paused.json()["paused"]
        assert state["by"] == "ledger" and state["at"] <= time.time() * 1000
        sub.wait_for(1, 10)  # the delivery in flight finished
        b.publish("pub", "orders", events(4, start=1))
        b.job_settled("tok-ledger-1")  # a worker took the job and found it paused
        assert len(sub.received) == 1  # nothing sent while paused
        listed = b.subscription("tok-ledger-1")
        assert listed["paused"] == state and listed["events"]["queued"] == 4
        again = b.call("POST", "/subscriber/pause", "tok-ledger-1").json()["paused"]
        assert again == state  # a second pause keeps the first's time and author
        resumed = b.call("POST", "/subscribers/ledger/resume", ROOT_KEY)
        assert resumed.status_code == 200 and resumed.json() == {"paused": None}
        delivered = sub.wait_for(5, 30)
        assert [e["url"] for e in delivered] == [f"https://o.test/{i}" for i in range(5)]
        assert b.subscription("tok-ledger-1")["paused"] is None
        by_root = b.call("POST", "/subscribers/ledger/pause", ROOT_KEY).json()["paused"]
        assert by_root["by"] == "root"
        b.publish("pub", "orders", events(1, start=5))
        b.job_settled("tok-ledger-1")
        assert len(sub.received) == 5
        b.call("POST", "/subscriber/resume", "tok-ledger-1")
        wait_until(lambda: len(sub.received) == 6, 30, "the event queued while paused")


def test_pausing_needs_a_subscription(redis_url: str, tmp_path: Path) -> None:
    with bus(redis_url, tmp_path) as b:
        b.client("nobody")
        for how in ("pause", "resume"):
            answer = b.call("POST", f"/subscriber/{how}", "nobody")
            assert answer.status_code == 404 and "subscription" in answer.json()["error"]
            missing = b.call("POST", f"/subscribers/nobody/{how}", ROOT_KEY)
            assert missing.status_code == 404


def busbar(b: Bus, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "busbar", *args], env=b.env, capture_output=True, text=True,
        timeout=60, cwd=b.log_dir,
    )  # fmt: skip


def test_busbar_subscriber_pauses_and_resumes_by_client_name(
    redis_url: str, tmp_path: Path
) -> None:
    sub = Subscriber()
    with serving(sub), bus(redis_url, tmp_path) as b:
        b.client("pub")
        b.client("ledger")
        b.subscribe("ledger", sub.url, ["orders"], max=1, timeout=0)
        paused = busbar(b, "subscriber", "pause", "ledger")
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.startswith("ledger: paused since ") and "@" in paused.stdout
        assert (
            b.subscription("ledger")["paused"]["by"]
            == f"{getpass.getuser()}@{socket.gethostname()}"
        )
        b.publish("pub", "orders", events(2))
        b.job_settled("ledger")
        assert sub.received == []
        resumed = busbar(b, "subscriber", "resume", "ledger")
        assert (resumed.returncode, resumed.stdout) == (0, "ledger: delivering\n")
        sub.wait_for(2, 30)
        unknown = busbar(b, "subscriber", "pause", "nobody")
        assert unknown.returncode == 1
        assert unknown.stderr.strip() == "busbar subscriber: no subscriber named nobody"


def test_a_circuit_open_too_long_pauses_its_subscriber_and_says_why(
    redis_url: str, tmp_path: Path
) -> None:
    env = {
        "BUSBAR_AUTO_PAUSE_S": "2",
        "BUSBAR_EXPIRE_INTERVAL": "1",
        "BUSBAR_CIRCUIT_FAILURES": "2",
        "BUSBAR_CIRCUIT_OUTAGE_MS": "0",
        "BUSBAR_RETRY_FIRST_MS": "100",
        "BUSBAR_CIRCUIT_PROBE_MS": "60000",
    }
    down, up = Subscriber(responder=lambda _: (500, 0.0)), Subscriber()
    with serving(down), serving(up), bus(redis_url, tmp_path, **env) as b:
        b.client("pub")
        b.client("ledger")
        b.client("healthy")
        b.subscribe("ledger", down.url, ["orders"], max=1, timeout=0)
        b.subscribe("healthy", up.url, ["orders"], max=1, timeout=0)
        b.publish("pub", "orders", events(2))
        wait_until(lambda: b.subscription("ledger")["circuit"]["state"] == "open", 30, "open")
        opened = b.subscription("ledger")["circuit"]["opened_at"]
        wait_until(lambda: b.subscription("ledger")["paused"] is not None, 30, "the pause")
        paused = b.subscription("ledger")["paused"]
        assert paused["by"].startswith("busbar: its circuit has been open since ")
        assert paused["at"] >= opened + 2000
        assert b.subscription("healthy")["paused"] is None
        metrics = b.call("GET", "/metrics", ROOT_KEY).text
        assert 'busbar_subscriber_paused{subscriber="ledger"} 1.0' in metrics, metrics
        assert 'busbar_subscriber_paused{subscriber="healthy"} 0.0' in metrics
        up.wait_for(2, 30)
        log = tmp_path / "worker0.log"
        # the worker logs the pause after the script that made it has returned
        said = "paused ledger: its circuit has been open for 2 s or more"
        wait_until(lambda: said in log.read_text(), 10, "the pause logged")


def test_events_past_their_ttl_expire_while_paused(redis_url: str, tmp_path: Path) -> None:
    sub = Subscriber()
    with serving(sub), bus(redis_url, tmp_path, BUSBAR_EXPIRE_INTERVAL="1") as b:
        b.client("pub")
        b.client("ledger")
        routes = [{"topic": "orders", "ttl": 1}, {"topic": "audits"}]
        b.subscribe("ledger", sub.url, routes, max=1, timeout=0)
        b.call("POST", "/subscriber/pause", "ledger")
        b.publish("pub", "orders", events(2))
        b.publish("pub", "audits", events(1, start=2))
        wait_until(lambda: b.subscription("ledger")["dropped"]["expired"] == 2, 30, "expiry")
        b.call("POST", "/subscriber/resume", "ledger")
        assert [e["url"] for e in sub.wait_for(1, 30)] == ["https://o.test/2"]
        b.job_settled("ledger")  # nothing more due
        assert len(sub.delivered) == 1  # the expired ones never go out

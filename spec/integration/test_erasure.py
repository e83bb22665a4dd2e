"""Erasure from outside (docs/erasure.md): real web and worker processes, real
subscribers, on one Redis and on a cluster. Two people's events are everywhere the bus
keeps events (delivered: the delivery log and the attempt streams; keyed at
concurrency 4; dead-lettered, with an answer body that names the url; queued behind a
pause, on a coalescing route); one of them is erased. Then every key Redis holds is read
whole: nothing names the erased url or holds its data, everything of the other is
where it was, the receipt counts what went, and the paused subscriber, resumed, gets
the other's events only."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, fast_scrub
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving
from spec.integration.test_callback_headers import everything_in as everything

ALICE, BOB = "https://people.test/alice", "https://people.test/bob"
SECRET = {ALICE: "alice@example.test", BOB: "bob@example.test"}


def people(n: int) -> list[dict[str, Any]]:
    """n events about each of the two, alternating; Alice's carry her ordering key."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        for url in (ALICE, BOB):
            event = {"type": "update", "url": url, "data": {"email": SECRET[url], "n": i}}
            if url == ALICE:
                event["key"] = "customer-alice"
            out.append(event)
    return out


def subscribe_all(b: Bus, ok: Subscriber, keyed: Subscriber, dead: Subscriber, paused: str) -> None:
    for name in ("pub", "ok", "keyed", "dead", "held"):
        b.client(name)
    b.subscribe("ok", ok.url, ["people"], max=2, timeout=0)
    b.subscribe("keyed", keyed.url, ["people"], max=1, timeout=0, concurrency=4)
    b.subscribe("dead", dead.url, ["people"], max=3, timeout=0, max_attempts=1)
    b.subscribe("held", paused, [{"topic": "people", "coalesce": True}], max=1, timeout=0)
    assert b.call("POST", "/subscriber/pause", "held").status_code == 200


def test_an_erasure_leaves_nothing_of_the_url_in_redis(redis_url: str, tmp_path: Path):
    dead = Subscriber(responder=lambda _: (500, 0.0), body_out=b"no room for " + ALICE.encode())
    with (
        serving() as ok,
        serving() as keyed,
        serving(dead),
        serving() as held,
        bus(redis_url, tmp_path) as b,
    ):
        subscribe_all(b, ok, keyed, dead, held.url)
        b.publish("pub", "people", people(6))
        ok.wait_for(12, 30)
        keyed.wait_for(12, 30)
        wait_until(lambda: len(dead.received) >= 4, 30, "the dead letters")
        # received is not yet acknowledged (or dead-lettered): the erasure must find the
        # last batches' delivery log entries, attempts and dead letters in place
        for name in ("ok", "keyed", "dead"):
            wait_until(lambda n=name: b.subscription(n)["events"]["queued"] == 0, 30,
                       f"{name}'s answers taken")  # fmt: skip
        before = everything(b.redis())
        assert SECRET[ALICE].encode() in before and ALICE.encode() in before

        asked = b.call("POST", "/erasures", ROOT_KEY, {"url": ALICE})
        assert asked.status_code == 202, asked.text
        receipt = asked.json()
        assert receipt["state"] == "running" and receipt["url"] == ALICE
        assert asked.headers["Location"] == f"/erasures/{receipt['id']}"
        done = _finished(b, receipt["id"])

        stores = done["stores"]
        assert stores["queued"]["events"] == 1  # coalesced: the latest of 6 waits
        assert stores["coalescing"]["entries"] == 1
        assert stores["deadletters"]["events"] == 6
        assert stores["deliveries"]["events"] == 12  # ok's 6, keyed's 6
        assert stores["attempts"]["entries"] >= 2 + 6  # dead's 2 batches, keyed's 6
        assert stores["attempt_log"]["entries"] == stores["attempts"]["entries"]
        assert "url" not in done and done["url_fingerprint"].startswith("sha256:")

        after = everything(b.redis())
        assert ALICE.encode() not in after and SECRET[ALICE].encode() not in after
        assert b"customer-alice" not in after
        assert after.count(SECRET[BOB].encode()) >= 6 + 6 + 6 + 1  # log, dead, queued

        assert b.call("POST", "/subscriber/resume", "held").status_code == 200
        got = held.wait_for(1, 30)
        b.job_settled("held")  # nothing more due
        assert [e["url"] for e in held.delivered] == [BOB] and got[0]["data"]["n"] == 5
        again = b.call("GET", f"/erasures/{receipt['id']}", ROOT_KEY).json()
        assert again == done  # a finished erasure stays as it finished
        listed = b.call("GET", "/erasures", ROOT_KEY).json()
        assert [e["id"] for e in listed] == [receipt["id"]]


def _finished(b: Bus, erasure_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def done() -> bool:
        found.clear()
        found.update(b.call("GET", f"/erasures/{erasure_id}", ROOT_KEY).json())
        return found["state"] == "done"

    wait_until(done, 30, "the erasure to finish")
    return found


def test_an_erasure_whose_worker_is_killed_finishes_on_another_exactly(
    redis_url: str, tmp_path: Path
):
    """`busbar erase` with no worker running: the erasure waits, running. A worker takes
    it and is killed (-9) once it has erased part of 8 paused subscribers' queues; the
    job comes back to another worker (the scrub), which finishes it: every one of Alice's
    queued events is counted once, and none is left. `busbar erase --show` prints the
    receipt."""
    names = [f"held{i}" for i in range(8)]
    with serving() as held, bus(redis_url, tmp_path, workers=0, **fast_scrub(2500)) as b:
        b.client("pub")
        for name in names:
            b.client(name)
            b.subscribe(name, held.url, ["people"], max=50, timeout=0)
            assert b.call("POST", "/subscriber/pause", name).status_code == 200
        for _ in range(10):
            b.publish("pub", "people", people(250))  # 2,500 of Alice's in all
        asked = busbar(b, "erase", "--url", ALICE)
        assert asked.returncode == 0, asked.stderr
        erasure = json.loads(asked.stdout)
        assert erasure["state"] == "running" and erasure["by"] == "busbar erase"
        client = b.redis()
        receipts = [shard.erasure(erasure["id"]) for shard in b.keys.all_shards()]

        def erased() -> int:
            return sum(int(client.hget(r, "queued.events") or 0) for r in receipts)

        killed: list[int] = []

        def kill_mid_way() -> None:  # start_worker() returns once it is ready: too late
            deadline = time.monotonic() + 60
            while not b.workers and time.monotonic() < deadline:
                time.sleep(0.001)
            while erased() == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            os.kill(b.workers[0].pid, signal.SIGKILL)
            killed.append(erased())

        watcher = threading.Thread(target=kill_mid_way)
        watcher.start()
        with contextlib.suppress(AssertionError):  # killed before it was ready, maybe
            b.start_worker()
        watcher.join()
        b.workers[0].wait()
        part = erased()
        assert killed and killed[0] <= part
        assert 0 < part < 8 * 2500, part  # killed mid-way
        b.start_worker()
        shown = busbar(b, "erase", "--show", erasure["id"], "--wait", "--timeout", "60")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        done = json.loads(shown.stdout)
        assert done["state"] == "done" and done["stores"]["queued"]["events"] == 8 * 2500
        after = everything(client)
        assert ALICE.encode() not in after and after.count(SECRET[BOB].encode()) == 8 * 2500
        for name in names:
            assert b.subscription(name)["events"]["queued"] == 2500


def busbar(b: Bus, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "busbar", *args], env=b.env, capture_output=True, text=True,
        timeout=120, cwd=b.log_dir,
    )  # fmt: skip

"""Ordering keys, end to end: `busbar web` and `busbar worker` processes, a real HTTP
subscriber, on both layouts. A subscription's `concurrency` n > 1 keeps up to n
deliveries in flight, each ordering key (the event's `key`, else its `url`) in publish
order and never in two deliveries at once (docs/semantics.md, Ordering keys)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

from app.models import partitions
from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.subscriber import Received, Subscriber, serving


class KeyWatch:
    """A responder that answers after `delay` s and records what a user of keys would
    check: the most requests at once, and any key seen in two requests at once."""

    def __init__(self, delay: float, fail: set[str] | None = None) -> None:
        self.delay = delay
        self.fail = fail or set()
        self.lock = threading.Lock()
        self.holding: dict[str, int] = defaultdict(int)
        self.overlaps: list[str] = []
        self.now = self.most = 0

    @staticmethod
    def key(event: dict) -> str:
        return str(event.get("key", event["url"]))

    def __call__(self, request: Received) -> tuple[int, float]:
        keys = {self.key(e) for e in request.events}
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.overlaps += [k for k in keys if self.holding[k]]
            for k in keys:
                self.holding[k] += 1
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
            for k in keys:
                self.holding[k] -= 1
        return (500 if keys & self.fail else 200), 0.0


def by_key(events: list[dict]) -> dict[str, list[int]]:
    order: dict[str, list[int]] = defaultdict(list)
    for e in events:
        order[KeyWatch.key(e)].append(e["data"]["i"])
    return order


def keyed(n: int, keys: int, start: int = 0, explicit: bool = False) -> list[dict]:
    """n events over `keys` urls (or explicit keys over n distinct urls), i in order."""
    out = []
    for i in range(start, start + n):
        if explicit:
            out.append({"type": "update", "url": f"https://o.test/e/{i}", "key": f"k{i % keys}",
                        "data": {"i": i}})  # fmt: skip
        else:
            out.append({"type": "update", "url": f"https://o.test/{i % keys}", "data": {"i": i}})
    return out


def test_concurrency_delivers_many_at_once_each_key_in_order(redis_url: str, tmp_path: Path):
    watch = KeyWatch(0.05)
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=1, timeout=0, concurrency=16)
        assert b.subscription("sub")["concurrency"] == 16
        sent = keyed(300, 30)
        started = time.monotonic()
        for i in range(0, len(sent), 50):
            b.publish("pub", "orders", sent[i : i + 50])
        got = sub.wait_for(300)
        took = time.monotonic() - started
        assert sorted(e["data"]["i"] for e in got) == list(range(300))  # each once
        assert by_key(got) == by_key(sent)  # every url in publish order
        assert watch.overlaps == []  # never one key in two deliveries at once
        assert watch.most >= 4, watch.most
        # one at a time would take 300 x 50 ms = 15 s
        assert took < 7.5, took
        wait_until(lambda: b.subscription("sub")["events"]["queued"] == 0, what="drained")


def test_explicit_keys_order_events_across_urls(redis_url: str, tmp_path: Path):
    watch = KeyWatch(0.02)
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=3, timeout=0, concurrency=8)
        sent = keyed(120, 6, explicit=True)
        b.publish("pub", "orders", sent[:60])
        b.publish("pub", "orders", sent[60:])
        got = sub.wait_for(120)
        assert by_key(got) == by_key(sent)
        assert watch.overlaps == []
        assert {e["key"] for e in got} == {f"k{i}" for i in range(6)}  # delivered as given
        # a bad key is refused, naming it, and nothing of that publish is queued
        bad = b.call("POST", "/topics/orders", "pub", [sent[0], {**sent[1], "key": ""}])
        assert bad.status_code == 400 and "key" in bad.json()["error"], bad.text
        long = b.call("POST", "/topics/orders", "pub", {**sent[0], "key": "é" * 129})
        assert long.status_code == 400 and "256 bytes" in long.json()["error"], long.text
        time.sleep(0.3)
        assert len(sub.delivered) == 120


def test_a_poisoned_key_holds_back_only_itself(redis_url: str, tmp_path: Path):
    watch = KeyWatch(0.01, fail={"https://o.test/0"})
    env = {"BUSBAR_RETRY_FIRST_MS": "100", "BUSBAR_CIRCUIT_FAILURES": "5"}
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path, **env) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=1, timeout=0, concurrency=8, max_attempts=3)
        sent = keyed(200, 20)
        b.publish("pub", "orders", sent)
        healthy = [e for e in sent if e["url"] != "https://o.test/0"]
        got = sub.wait_for(len(healthy), timeout=20)
        assert by_key(got) == by_key(healthy)
        # the poisoned key's events go to the dead letters, one batch after another, and
        # the circuit never opens: the endpoint answers every other key
        wait_until(lambda: b.subscription("sub")["deadletters"] == 10, 40, "dead letters")
        entry = b.subscription("sub")
        assert entry["circuit"]["state"] == "closed", entry["circuit"]
        # the healthy keys' last batches leave the queue once their answers are taken
        queued = lambda: b.subscription("sub")["events"]["queued"]  # noqa: E731
        wait_until(lambda: queued() == 0, 10, "nothing queued")
        letters = b.call("GET", "/subscriber/deadletters", "sub").json()
        assert [e["data"]["i"] for e in letters] == list(range(0, 200, 20))
        # fixed, the dead letters replay in their key's order
        watch.fail.clear()
        assert b.call("POST", "/subscriber/deadletters/replay", "sub").status_code == 202
        sub.wait_for(200, timeout=20)
        replayed = [e["data"]["i"] for e in sub.delivered if e["url"] == "https://o.test/0"]
        assert replayed == list(range(0, 200, 20))
        assert watch.overlaps == []


def test_changing_concurrency_with_events_queued_keeps_each_keys_order(
    redis_url: str, tmp_path: Path
):
    watch = KeyWatch(0.01)
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=2, timeout=0)
        assert b.call("POST", "/subscriber/pause", "sub").status_code == 200
        first = keyed(100, 10)
        b.publish("pub", "orders", first)
        # to 8 partitions: what was queued drains first, in its old order
        b.subscribe("sub", sub.url, ["orders"], max=2, timeout=0, concurrency=8)
        entry = b.subscription("sub")
        assert (entry["concurrency"], entry["draining"]) == (8, 1)
        second = keyed(100, 10, start=100)
        b.publish("pub", "orders", second)
        assert b.call("POST", "/subscriber/resume", "sub").status_code == 200
        got = sub.wait_for(200)
        assert by_key(got) == by_key(first + second)
        assert watch.overlaps == []
        wait_until(lambda: b.subscription("sub")["draining"] is None, what="the drain to end")
        # and back to one: in publish order over the whole lane again
        b.subscribe("sub", sub.url, ["orders"], max=1, timeout=0, concurrency=1)
        third = keyed(30, 3, start=200)
        b.publish("pub", "orders", third)
        got = sub.wait_for(230)
        assert [e["data"]["i"] for e in got[200:]] == list(range(200, 230))


def test_a_change_while_a_failing_endpoint_holds_the_drain_is_taken(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    """Issue 53, defect 4: 4 -> 1 while the endpoint failed left the old layout unable
    to drain, and every further change was a 409. Now each change is taken at once: the
    layout that waited folds into the newest, and going back to 4 ends the wait; once
    the endpoint answers, everything arrives, each key in order, never twice at once."""
    watch = KeyWatch(0.005, fail={f"https://o.test/{i}" for i in range(10)})
    env = {"BUSBAR_RETRY_FIRST_MS": "100", "BUSBAR_RETRY_LONE_MS": "50"}
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path, **env) as b:
        b.client("pub"), b.client("sub")

        def change(concurrency: int) -> None:
            body = {"topics": ["orders"], "callback": sub.url, "max": 2, "timeout": 0,
                    "concurrency": concurrency}  # fmt: skip
            answer = b.call("POST", "/subscription", "sub", body)
            assert answer.status_code == 204, answer.text

        change(4)
        first = keyed(40, 10)
        b.publish("pub", "orders", first)
        wait_until(lambda: len(watch.holding) >= 4, 10, "failing deliveries")
        change(1)  # the 16 partitions drain (failing), the layout of 1 waits
        assert b.subscription("sub")["draining"] == 4
        second = keyed(40, 10, start=40)
        b.publish("pub", "orders", second)
        change(2)  # taken: the layout of 1 folds into 8 partitions, still after the drain
        entry = b.subscription("sub")
        assert (entry["concurrency"], entry["draining"]) == (2, 4), entry
        third = keyed(40, 10, start=80)
        b.publish("pub", "orders", third)
        change(4)  # back to the layout that drains: it is the current one again
        assert b.subscription("sub")["draining"] is None
        assert b.subscription("sub")["events"]["queued"] == 120
        watch.fail.clear()
        got = sub.wait_for(120, timeout=60)
        assert by_key(got) == by_key(first + second + third)
        assert watch.overlaps == []


def test_a_key_failing_forever_holds_back_none_of_its_partition_mates(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    """Issue 53, defect 3: at `concurrency` 8, one url answering 500 forever (no
    `max_attempts`) among 60 held back the urls that hash to its partition. Now its
    events step aside (docs/internals.md, Keys set aside): every other url's events
    arrive, in order, while the poisoned one is retried on its backoff."""
    poisoned = "https://o.test/0"
    watch = KeyWatch(0.005, fail={poisoned})
    with serving(Subscriber(responder=watch)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=1, timeout=0, concurrency=8)
        n = partitions.count(8)
        mates = [u for u in range(1, 60)
                 if partitions.partition_of(f"https://o.test/{u}", n)
                 == partitions.partition_of(poisoned, n)]  # fmt: skip
        sent = keyed(300, 60)
        b.publish("pub", "orders", sent)
        healthy = [e for e in sent if e["url"] != poisoned]
        got = sub.wait_for(len(healthy), timeout=30)
        assert by_key(got) == by_key(healthy)
        assert mates, "the test needs urls that share the poisoned one's partition"
        assert watch.overlaps == []
        # the subscriber holds the last events before the worker has their answers:
        # they leave the queue a moment later, while the poisoned url's five stay
        queued = lambda: b.subscription("sub")["events"]["queued"]  # noqa: E731
        wait_until(lambda: queued() == 5, 10, "only the poisoned url's events queued")
        assert b.subscription("sub")["circuit"]["state"] == "closed"
        attempted = [r for r in sub.received if r.events and r.events[0]["url"] == poisoned]
        assert [r.events[0]["data"]["i"] for r in attempted] == [0] * len(attempted)

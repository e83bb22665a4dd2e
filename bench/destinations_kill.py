"""A broker killed under a keyed run (bench.destinations' second measurement): what an
outage costs a destination, and whether busbar's promises hold through it (every event
stored at least once, each key's first arrivals in publish order; JetStream drops a
resent prefix by its id, RabbitMQ keeps no ids, so there a resent batch arrives twice;
SQS's FIFO queue drops a resent id, but moto only while the first copy is undeleted).

N keyed events are published at RATE in POSTs of CHUNK, faster than the worker sends
them, so batches are in flight at the kill; once KILL_AT of them are stored the broker
is killed (SIGKILL) and started again OUTAGE_S later on its port and store. Once busbar
has sent every event, the stream or queue is read back and judged; the attempt log and
the listing, read as the run goes, tell the failed attempts, how much of their batches
the broker had confirmed before they failed, and whether the circuit opened.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from bench import common
from bench.destinations_bus import Stored, Target, events, listing, subscribe, wait_for

KEYS, CONCURRENCY, CHUNK, RATE, OUTAGE_S, KILL_AT = 16, 4, 200, 5000.0, 5.0, 0.3
HELD_MS = 1000  # a failed attempt this long waited on something: listed one by one
CONFIRMED = re.compile(r"(\d+) of \d+ (?:confirmed|sent)")


class Publisher(threading.Thread):
    """Chunks of events published at a steady rate, in order, on a thread of its own."""

    def __init__(self, the_bus: common.Bus, topic: str, chunks: list[Any], rate: float) -> None:
        super().__init__(daemon=True)
        self.the_bus, self.topic, self.chunks, self.rate = the_bus, topic, chunks, rate
        self.late: list[float] = []
        self.finished = 0.0  # when the last publish was answered (epoch seconds)
        self.error: BaseException | None = None

    def run(self) -> None:
        def send(api: common.Api, i: int) -> None:
            api.ok("POST", f"/topics/{self.topic}", self.chunks[i])

        try:
            connect = lambda: self.the_bus.api("pub")  # noqa: E731
            self.late = common.paced(self.rate, connect, send, len(self.chunks))
            self.finished = time.time()
        except BaseException as exc:  # reported by the measurement
            self.error = exc


class Watch:
    """The subscriber's attempts and circuit, read as the run goes (the log keeps its
    last 100, BUSBAR_ATTEMPT_LOG): the failed ones by reason, how many had the broker
    confirm part of their batch first, the longest, and when the circuit opened."""

    def __init__(self, the_bus: common.Bus, token: str) -> None:
        self.api = the_bus.api(token)
        self.seen: dict[str, dict[str, Any]] = {}
        self.opened: float | None = None  # when the circuit opened (epoch s)

    def take(self) -> dict[str, Any]:
        """Reads the log and the listing; returns the listing's entry."""
        path = "/subscriber/attempts?limit=1000"
        self.seen.update((a["id"], a) for a in json.loads(self.api.ok("GET", path))["attempts"])
        (entry,) = json.loads(self.api.ok("GET", "/subscriptions"))
        if entry["circuit"]["state"] == "open" and self.opened is None:
            self.opened = entry["circuit"]["opened_at"] / 1e3
        return dict(entry)

    def wait(self, seconds: float) -> None:
        """Sleep for `seconds`, reading the log meanwhile."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.take()
            time.sleep(min(0.3, left))

    def failed(self, killed: float, restarted: float) -> dict[str, Any]:
        # a confirmed attempt is listed with the reason `confirmed`: by reason here
        found = [a for a in self.seen.values() if a["reason"] not in (None, "confirmed")]
        reasons: dict[str, int] = defaultdict(int)
        for attempt in found:
            reasons[attempt["reason"]] += 1
        prefixes = [confirmed(a["body"]) for a in found]
        ok = [a["at"] / 1e3 for a in self.seen.values() if a["reason"] in (None, "confirmed")]
        ok_after = [at for at in ok if at >= restarted]
        return {
            "failed by reason": dict(reasons), "failed part way": sum(p > 0 for p in prefixes),
            "confirmed before failing": sum(prefixes),
            "longest failed attempt, s": max((a["duration_ms"] for a in found), default=0) / 1e3,
            "circuit opened after the kill, s": None if self.opened is None
            else self.opened - killed,
            "first confirmed attempt after the restart, s": min(ok_after, default=restarted)
            - restarted,
            "held attempts": sorted(
                (a["partition"] or "-", (a["at"] - a["duration_ms"]) / 1e3 - killed,
                 a["duration_ms"] / 1e3, a["reason"], a["body"])
                for a in found if a["duration_ms"] >= HELD_MS
            ),
        }  # fmt: skip

    def close(self) -> None:
        self.api.close()


def confirmed(body: str) -> int:
    """How many of its batch an attempt had confirmed: its body says "k of n confirmed;
    then <reason>" (app/delivery/nats_publisher.py, rabbitmq_publisher.py), or "k of n
    sent; then <reason>" (sqs_publisher.py: the calls SQS answered)."""
    found = CONFIRMED.match(body)
    return int(found[1]) if found else 0


def killed_run(the_bus: common.Bus, target: Target, n: int, count: int) -> dict[str, Any]:
    """Keyed events published faster than the worker sends them, the broker killed once
    KILL_AT of them are stored and restarted OUTAGE_S later; what it holds once busbar
    sent them all."""
    target.fresh(n)
    destination = target.destination(n)
    token, topic = subscribe(the_bus, n, destination, max=100, concurrency=CONCURRENCY)
    sent = events(count, KEYS)
    chunks = [sent[at : at + CHUNK] for at in range(0, count, CHUNK)]
    publisher = Publisher(the_bus, topic, chunks, RATE / CHUNK)
    watch = Watch(the_bus, token)
    try:
        began = time.time()
        publisher.start()

        def reached() -> bool:
            watch.take()
            return target.count(n) >= KILL_AT * count

        wait_for(reached, f"{KILL_AT:.0%} of the events stored")
        before = target.count(n)
        target.kill()
        killed = time.time()
        watch.wait(OUTAGE_S)
        target.restart()
        restarted = time.time()

        def settled() -> bool:
            if publisher.error is not None:
                raise publisher.error
            entry = watch.take()
            done = entry["events"]["sent"] + entry["deadletters"] >= count
            return done and not publisher.is_alive()

        wait_for(settled, f"busbar sending the {count} events")
        settled_at, entry = time.time(), listing(the_bus, token)
        failures = watch.failed(killed, restarted)
    finally:
        watch.close()
    held = target.read(n)
    first, last = target.arrivals(n, held, restarted)
    the_bus.unsubscribe(token)
    target.remove(n)
    return judged(held, count) | failures | {
        "stored at the kill": before, "publish took, s": publisher.finished - began,
        "failed attempts": entry["failures"], "dead letters": entry["deadletters"],
        "attempts": {k: v for k, v in entry["attempts"].items() if v},
        "down, s": restarted - killed,
        "first after the restart, s": first - restarted,
        "last after the restart, s": last - restarted, "kill to last, s": last - killed,
        "settled after the restart, s": settled_at - restarted,
        "publish late, s": max(publisher.late, default=0.0),
    }  # fmt: skip


def judged(held: list[Stored], count: int) -> dict[str, Any]:
    """What the broker holds against what was published: ids, repeats, order per key
    (of first arrivals: a repeat is counted apart)."""
    ids = Counter(m.msg_id for m in held)
    bodies = [json.loads(m.data) for m in held]
    numbers = {b["data"]["i"] for b in bodies}
    per_key: dict[str, list[int]] = defaultdict(list)
    seen: set[int] = set()
    for body in bodies:
        i = body["data"]["i"]
        if i not in seen:
            seen.add(i)
            per_key[body["key"]].append(i)
    return {
        "published": count, "stored": len(held), "distinct ids": len(ids),
        "missing": len(set(range(count)) - numbers), "stored twice": len(held) - len(ids),
        "events stored twice or more": sum(c > 1 for c in ids.values()),
        "most copies of one": max(ids.values(), default=0),
        "ids as message ids": sum(b["id"] == m.msg_id for b, m in zip(bodies, held, strict=True)),
        "keys out of order": sum(v != sorted(v) for v in per_key.values()),
        "out of order": [k for k, v in per_key.items() if v != sorted(v)],
    }  # fmt: skip

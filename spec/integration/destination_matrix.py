"""The destination matrix (docs/tests.md, "The composition matrix"): a subscription's
`destination` (NATS JetStream, RabbitMQ, SQS FIFO) met with every other subscriber-side
feature a destination takes: failures that dead-letter and an outage, transforms that
shape and drop, priority and typed routes, batch sizes, ordering keys, filters, pause
and schemas; each cell at `concurrency` 1 and 4, all on one bus with the three real
brokers (spec/integration/destination_sides.py).

The cells are spec/integration/matrix.py's covering array over these dimensions, and
each cell's events, routes, filter and transform are that matrix's (a matrix.Cell holds
them, its HTTP-only features off). The script: subscribe, cut the outage cells' brokers
(a forwarder, spec/tcp_forwarder.py) for OUTAGE_S, pause the pausing cells through the
first round, publish two rounds and the bulk that breaks the schema, let the failing
cells dead-letter, mend their brokers, replay, then read every broker. `problems()`
says, per subscription, what differs from what its cell promises."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from spec.integration import matrix
from spec.integration.bus import Bus, bus
from spec.integration.destination_sides import SECRET, Side, brokers
from spec.tcp_forwarder import Forwarder, forwarder

DIMENSIONS: dict[str, tuple[Any, ...]] = {
    "kind": ("nats", "rabbitmq", "sqs"),
    "failing": ("none", "dead_letters", "outage"),
    "transform": ("none", "shape", "drop"),
    "route": ("plain", "priority", "types"),
    "max": (1, 10),
    "key": ("url", "explicit"),
    "filter": ("none", "subset"),
    "pause": (False, True),
    "schema": ("none", "enforced"),
}
DEAD = {"nats": "no_stream", "rabbitmq": "unroutable", "sqs": "no_queue"}  # the failing's
OUTAGE_S = 1.5
ENV = {"BUSBAR_RETRY_FIRST_MS": "100", "BUSBAR_RETRY_LONE_MS": "100",
       "BUSBAR_CIRCUIT_PROBE_MS": "500", "BUSBAR_MAX_BACKOFF_MS": "500",
       # moto's SQS under make test's load answers in seconds: a timeout there would be
       # the machine's, not what a cell is about
       "BUSBAR_TIMEOUT": "10", "BUSBAR_CONNECT_TIMEOUT": "1",
       "BUSBAR_ATTEMPT_LOG": "1000",
       # no circuit: a cell whose destination refuses everything dead-letters its
       # events (an open circuit's failed probes count toward no `max_attempts`, so an
       # outage dead-letters nothing: docs/delivery.md), and the replay comes after
       "BUSBAR_CIRCUIT_FAILURES": "100000"}  # fmt: skip
SETTLE_S = 60.0


@dataclass(frozen=True)
class DCell:
    number: int
    kind: str
    cell: matrix.Cell  # the events, route, filter, transform, key, pause, schema, failing

    @property
    def id(self) -> str:
        shown = [self.kind, self.cell.failing, self.cell.transform, self.cell.route,
                 f"max{self.cell.max}", self.cell.key, self.cell.filter,
                 "pause" if self.cell.pause else "", self.cell.schema]  # fmt: skip
        return f"{self.number:02d}-" + "+".join(s for s in shown if s not in ("", "none"))


def cells() -> tuple[DCell, ...]:
    made = []
    for n, row in enumerate(matrix.pairwise(DIMENSIONS)):
        kind = row.pop("kind")
        base = matrix.Cell(50 + n, auth="basic", headers="none", cert="none", signing="one",
                           event_ids=True, retry_after=False, **row)  # fmt: skip
        made.append(DCell(n, kind, base))
    return tuple(made)


CELLS = cells()


@dataclass
class DSub:
    dcell: DCell
    concurrency: int
    forwarder: Forwarder | None = None
    while_paused: dict = field(default_factory=dict)
    deadletters: list[dict] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)  # what the broker holds
    tried: dict = field(default_factory=dict)
    listing: dict = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"d{self.dcell.number:02d}c{self.concurrency}"


@dataclass
class Outcome:
    subs: list[DSub]
    odd: dict[int, int]  # each cell's odd bulk's status
    logs: str
    late: list[str]


def run(redis_url: str, base: Path, cells_: tuple[DCell, ...] = CELLS) -> Outcome:
    subs = [DSub(c, k) for c in cells_ for k in matrix.CONCURRENCIES]
    late: list[str] = []
    with ExitStack() as stack:
        sides = stack.enter_context(brokers(base / "brokers"))
        b = stack.enter_context(bus(redis_url, base, **ENV))
        b.client("pub")
        for sub in subs:
            subscribe(b, sub, sides[sub.dcell.kind], stack)
        odd = publish(b, subs, cells_)
        settle(b, late, "the second round")
        for sub in subs:
            if sub.dcell.cell.failing == "dead_letters":
                sub.deadletters = b.call("GET", "/subscriber/deadletters", sub.name).json()
                sides[sub.dcell.kind].mend(sub.name)
                answer = b.call("POST", "/subscriber/deadletters/replay", sub.name)
                assert answer.status_code == 202, answer.text
        settle(b, late, "the replay", deadletters=True)
        for sub in subs:
            sub.held = sides[sub.dcell.kind].read(sub.name)
            sub.tried = b.call("POST", "/subscription/test", sub.name).json()
            sub.attempts = matrix.attempts(b, sub.name)
        listed = matrix.listing(b)
        for sub in subs:
            sub.listing = listed[sub.name]
    logs = "".join(p.read_text(errors="replace") for p in base.glob("*.log"))
    return Outcome(subs, odd, logs, late)


def subscribe(b: Bus, sub: DSub, side: Side, stack: ExitStack) -> None:
    cell = sub.dcell.cell
    side.make(sub.name, ready=cell.failing != "dead_letters")
    port = side.port
    if cell.failing == "outage":
        sub.forwarder = stack.enter_context(forwarder(("127.0.0.1", side.port)))
        port = sub.forwarder.port
    b.client(sub.name)
    body: dict[str, Any] = {"topics": [cell.route_body()], "max": cell.max, "timeout": 0,
                            "concurrency": sub.concurrency,
                            "destination": side.destination(sub.name, port)}  # fmt: skip
    if cell.failing == "dead_letters":
        body["max_attempts"] = matrix.MAX_ATTEMPTS
    answer = b.call("POST", "/subscription", sub.name, body)
    assert answer.status_code == 204, answer.text
    if cell.schema == "enforced" and sub.concurrency == matrix.CONCURRENCIES[0]:
        put = b.call("PUT", f"/topics/{cell.topic}/schemas/update", "pub", matrix.SCHEMA)
        assert put.status_code in (200, 201, 204), put.text


def publish(b: Bus, subs: list[DSub], cells_: tuple[DCell, ...]) -> dict[int, int]:
    """The first round with the pausing cells paused and the outage cells' brokers cut
    for OUTAGE_S; then the second round and the odd bulk: its status, per cell."""
    for sub in subs:
        if sub.dcell.cell.pause:
            assert b.call("POST", "/subscriber/pause", sub.name).status_code == 200
        else:
            outage(b, sub)
    for c in cells_:
        for lo, hi in matrix.ROUNDS[0]:
            b.publish("pub", c.cell.topic, [matrix.event(c.cell, i) for i in range(lo, hi)])
    time.sleep(matrix.PAUSE_S)
    listed = matrix.listing(b)
    for sub in subs:
        if sub.dcell.cell.pause:
            sub.while_paused = listed[sub.name]
            outage(b, sub)  # from its first attempt, as for the others
            assert b.call("POST", "/subscriber/resume", sub.name).status_code == 200
    odd = {}
    for c in cells_:
        for lo, hi in matrix.ROUNDS[1]:
            b.publish("pub", c.cell.topic, [matrix.event(c.cell, i) for i in range(lo, hi)])
        bulk = [matrix.event(c.cell, i) for i in matrix.ODD]
        odd[c.number] = b.call("POST", f"/topics/{c.cell.topic}", "pub", bulk).status_code
    return odd


def outage(b: Bus, sub: DSub) -> None:
    """An outage cell's broker cut for OUTAGE_S, and until an attempt failed on it (on a
    loaded machine the first attempt may come later than OUTAGE_S: the outage would
    have been over, and the cell would test nothing)."""
    gate = sub.forwarder
    if gate is None:
        return
    gate.cut()

    def mend() -> None:
        deadline = time.monotonic() + SETTLE_S
        time.sleep(OUTAGE_S)
        while time.monotonic() < deadline:
            # a request of its own: the Bus's session is the main thread's
            (listed,) = requests.get(f"{b.base}/subscriptions", auth=(sub.name, ""),
                                     timeout=10).json()  # fmt: skip
            attempts = listed["attempts"]
            if attempts["connection"] + attempts["timeout"]:
                break
            time.sleep(0.1)
        gate.mend()

    threading.Thread(target=mend, daemon=True).start()


def settle(b: Bus, late: list[str], what: str, deadletters: bool = False) -> None:
    def busy() -> dict[str, Any]:
        return {
            name: (e["events"]["queued"], e["in_flight"], e["deadletters"])
            for name, e in matrix.listing(b).items()
            if e["events"]["queued"] or e["in_flight"] or (deadletters and e["deadletters"])
        }

    deadline = time.monotonic() + SETTLE_S
    while left := busy():
        if time.monotonic() > deadline:
            late.append(f"{what}: (queued, in flight, dead letters) {left}")
            return
        time.sleep(0.1)


def problems(sub: DSub, outcome: Outcome) -> list[str]:
    """What this subscription met that its cell does not promise; [] when all held."""
    return [p for check in CHECKS for p in check(sub, outcome)]


def arrivals(sub: DSub, outcome: Outcome) -> list[str]:
    """Everything the route takes is in the broker as its transform shaped it, nothing
    else; once, but for RabbitMQ through an outage (it keeps no ids: a batch sent again
    is stored again, docs/destinations.md); each event's id its deduplication id."""
    cell, found = sub.dcell.cell, []
    sent = {matrix.number(e): e for e in matrix.accepted(cell, outcome.odd[sub.dcell.number])}
    want = {i for i, e in sent.items() if cell.takes(e)}
    got = Counter(matrix.number(m) for m in sub.held)
    if set(got) != want:
        found.append(f"missing {sorted(want - set(got))}, not promised {sorted(set(got) - want)}")
    twice = sorted(i for i, n in got.items() if n > 1)
    if twice and not (sub.dcell.kind == "rabbitmq" and cell.failing == "outage"):
        found.append(f"stored more than once: {twice}")
    for m in sub.held:
        i = matrix.number(m)
        if i in sent and m["data"] != cell.shaped(sent[i]["data"]):
            found.append(f"event {i} arrived as {m['data']}")
        if m["dedup"] != m["id"]:
            found.append(f"event {i}'s deduplication id {m['dedup']} is not its id {m['id']}")
    return found


def order(sub: DSub, outcome: Outcome) -> list[str]:
    """Each key's first arrivals in publish order (the replay of the dead letters too)."""
    firsts: dict[int, dict] = {}
    for m in sub.held:
        firsts.setdefault(matrix.number(m), m)
    per_key: dict[str, list[int]] = defaultdict(list)
    for i, m in firsts.items():
        per_key[matrix.key(m)].append(i)
    return [f"key {k} out of order: {seq}" for k, seq in per_key.items()
            if not matrix.increasing(seq)]  # fmt: skip


def failing(sub: DSub, outcome: Outcome) -> list[str]:
    """A missing stream, binding or queue dead-letters with the kind's reason; an outage
    is failed attempts then successes; the test call finds the mended broker."""
    cell, found = sub.dcell.cell, []
    reasons = {d["last_status"] for d in sub.deadletters}
    if cell.failing == "dead_letters" and reasons != {DEAD[sub.dcell.kind]}:
        found.append(f"dead letters with {reasons}, not {DEAD[sub.dcell.kind]}")
    if cell.failing != "dead_letters" and sub.deadletters:
        found.append(f"{len(sub.deadletters)} dead letters")
    outcomes = Counter(a["outcome"] for a in sub.attempts)
    if cell.failing == "outage" and not outcomes.keys() - {"2xx"}:
        found.append(f"no failed attempt through the outage: {dict(outcomes)}")
    if sub.tried.get("status") != 200:
        found.append(f"the test call answered {sub.tried}")
    return found


def paused(sub: DSub, outcome: Outcome) -> list[str]:
    """Paused through the first round: nothing sent meanwhile."""
    if not sub.dcell.cell.pause:
        return []
    sent = sub.while_paused.get("events", {}).get("sent")
    return [] if sent == 0 else [f"{sent} sent while paused"]


def listed(sub: DSub, outcome: Outcome) -> list[str]:
    """The listing shows the destination with its secret only as set; no log has it."""
    shown = sub.listing.get("destination") or {}
    secret = "secret_access_key" if sub.dcell.kind == "sqs" else "password"
    found = [] if (shown.get(secret) or {}).get("secret") is True else [f"listed {shown}"]
    if SECRET in str(sub.listing) or SECRET in outcome.logs:
        found.append("the broker's password was listed or logged")
    return found


CHECKS: tuple[Callable[[DSub, Outcome], list[str]], ...] = (
    arrivals, order, failing, paused, listed,
)  # fmt: skip

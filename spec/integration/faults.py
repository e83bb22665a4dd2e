"""Helpers for the fault tests: a Redis server of the test's own that can be killed and
restarted, a publisher that keeps publishing and remembers what was acknowledged, and
an account of the events a subscriber received more than once."""

from __future__ import annotations

import itertools
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests

from dev import redis_server
from spec.conftest import ROOT_KEY
from spec.integration.bus import events
from spec.integration.subscriber import Received, Subscriber


@dataclass
class OwnRedis:
    """A server for one test: its options (AOF, maxmemory) must not leak into the others."""

    data_dir: Path
    options: dict[str, str]
    persistent: bool
    port: int = field(default_factory=redis_server.free_port)
    server: redis_server.RedisServer | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.server = redis_server.start(
            self.data_dir, port=self.port, persistent=self.persistent, options=self.options
        )

    def stop(self) -> None:
        """SIGTERM: Redis flushes the AOF and exits cleanly, like a planned restart."""
        assert self.server is not None
        self.server.stop()

    def crash(self) -> None:
        """kill -9: no shutdown save, so only what the AOF already holds survives."""
        assert self.server is not None
        os.kill(self.server.process.pid, signal.SIGKILL)
        self.server.process.wait()


@contextmanager
def own_redis(data_dir: Path, persistent: bool, **options: str) -> Iterator[OwnRedis]:
    own = OwnRedis(data_dir, options, persistent)
    own.start()
    try:
        yield own
    finally:
        if own.server:
            own.server.stop()


class Publisher:
    """Publishes numbered events in small bulks from a thread, like a steady producer.

    An event counts as acknowledged only when its request was answered 204; the numbers
    of a request that failed are never reused, so a later delivery of one of them (the
    script may have run before the answer was lost) is told apart from a duplicate.
    """

    def __init__(
        self,
        base: str | Sequence[str],
        token: str,
        topic: str,
        chunk: int = 5,
        pause: float = 0.05,
        padding: int = 0,
        keys: int = 0,
    ) -> None:
        # several bases (web processes): each request goes to the next, in turn
        bases = [base] if isinstance(base, str) else list(base)
        self.topic = topic
        self.urls = [f"{b}/topics/{topic}" for b in bases]
        self.token = token
        self.chunk = chunk
        self.pause = pause
        self.padding = "x" * padding  # bytes of data per event, to fill memory faster
        self.keys = keys  # with keys > 0, event i carries the ordering key `k<i mod keys>`
        self.acked: list[int] = []
        self.statuses: Counter[str] = Counter()
        self.answered_204: list[float] = []  # time.monotonic() of each 204, in order
        self.unhinted_503 = 0  # 503s that did not say when to come back (Retry-After)
        self._sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="publisher", daemon=True)

    def _run(self) -> None:
        with requests.Session() as http:
            while not self._stop.is_set():
                start, self._sent = self._sent, self._sent + self.chunk
                try:
                    response = http.post(
                        self.urls[start // self.chunk % len(self.urls)],
                        json=self._events(start),
                        auth=(self.token, ""),
                        timeout=30,
                    )
                    status = str(response.status_code)
                    if status == "503" and "Retry-After" not in response.headers:
                        self.unhinted_503 += 1
                except requests.RequestException as exc:
                    status = type(exc).__name__
                self.statuses[status] += 1
                if status == "204":
                    self.acked.extend(range(start, start + self.chunk))
                    self.answered_204.append(time.monotonic())
                self._stop.wait(self.pause)

    def move_to(self, base: str) -> None:
        """Publish through another web from the next request on, as a load balancer
        moves over when a web is replaced."""
        self.urls = [f"{base}/topics/{self.topic}"]

    def longest_wait(self, since: float, until: float) -> float:
        """The longest time between two 204s (or a bound of the window and a 204) within
        [since, until]: how long publishing stood still."""
        times = [since, *(t for t in self.answered_204 if since <= t <= until), until]
        return max(b - a for a, b in itertools.pairwise(times))

    def _events(self, start: int) -> list[dict]:
        batch = events(self.chunk, start)
        for event in batch:
            if self.padding:
                event["data"]["p"] = self.padding
            if self.keys:
                event["key"] = f"k{event['data']['i'] % self.keys}"
        return batch

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the publisher is stuck in a request"


def numbers(sub: Subscriber) -> set[int]:
    """The event numbers a subscriber acknowledged at least once."""
    return {e["data"]["i"] for e in sub.delivered}


def wait_for_numbers(sub: Subscriber, wanted: set[int], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wanted <= numbers(sub):
            return
        time.sleep(0.1)
    missing = sorted(wanted - numbers(sub))
    raise AssertionError(f"{what}: {len(missing)} events never delivered, first {missing[:10]}")


@dataclass
class Replays:
    """Events delivered more than once, and whether each was a whole batch sent again."""

    # for each repeated request, when the copy before it arrived: the request a crash
    # interrupted (a batch interrupted twice counts twice, each time against its copy)
    batches: list[float] = field(default_factory=list)
    copies: list[Received] = field(default_factory=list)  # ... and that copy itself
    events: int = 0
    partial: int = 0  # repeated events not part of an identical earlier request
    told: list[str] = field(default_factory=list)  # each such request, when, and its events'


def clock(at: float) -> str:
    return f"{time.strftime('%H:%M:%S', time.gmtime(at))}.{int(at * 1000) % 1000:03d}"


def replays(sub: Subscriber) -> Replays:
    """At-least-once means a crash resends the batch it interrupted, unchanged: a
    duplicate anywhere else would be a bug, not the price of a crash."""
    found = Replays()
    first: dict[int, Received] = {}  # each event's first acknowledged request
    last_copy: dict[tuple[int, ...], Received] = {}
    for request in (r for r in sub.received if 200 <= r.status < 300):
        batch = tuple(e["data"]["i"] for e in request.events)
        repeated = [i for i in batch if i in first]
        if repeated:
            found.events += len(repeated)
            if batch in last_copy:
                found.batches.append(last_copy[batch].at)
                found.copies.append(last_copy[batch])
            else:
                found.partial += len(repeated)
                before = {f"{first[i].headers.get('webhook-id')} at {clock(first[i].at)}"
                          for i in repeated}  # fmt: skip
                found.told.append(
                    f"{request.headers.get('webhook-id')} at {clock(request.at)} "
                    f"({len(batch)} events) repeated {repeated[:5]} first in "
                    f"{'; '.join(sorted(before))}"
                )
        last_copy[batch] = request
        for i in batch:
            first.setdefault(i, request)
    return found


def metric(base: str, name: str) -> float:
    """One unlabelled sample of GET /metrics, as an operator's scraper would read it."""
    text = requests.get(f"{base}/metrics", auth=(ROOT_KEY, ""), timeout=10).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def key(event: dict) -> str:
    return str(event.get("key", event["url"]))


def key_overlaps(sub: Subscriber) -> list[str]:
    """Pairs of requests in flight at once that held one ordering key (a whole batch
    sent again after its attempt timed out or was cut short is told as such)."""
    found = []
    done = sorted(sub.received, key=lambda r: r.started)
    for i, a in enumerate(done):
        held = {key(e) for e in a.events}
        for b in done[i + 1 :]:
            if b.started >= a.ended:
                break
            shared = held & {key(e) for e in b.events}
            if shared:
                first, second = a.headers.get("webhook-id"), b.headers.get("webhook-id")
                again = "the same batch again" if first == second else second
                found.append(f"{sorted(shared)[:3]} in {first} and {again}")
    return found


def out_of_order(sub: Subscriber) -> list[str]:
    """Events acknowledged for the first time after a later event of their key: each
    key's events must arrive in publish order (a whole batch sent again repeats what was
    already there, which is not a reordering)."""
    seen: set[int] = set()
    latest: dict[str, int] = {}
    found = []
    for request in sorted((r for r in sub.received if 200 <= r.status < 300), key=lambda r: r.at):
        for event in request.events:
            i = event["data"]["i"]
            if i in seen:
                continue
            seen.add(i)
            if i < latest.get(key(event), -1):
                found.append(f"{i} after {latest[key(event)]} (key {key(event)})")
            latest[key(event)] = max(i, latest.get(key(event), -1))
    return found

"""A long answer takes turns with the requests beside it.

Under the gevent worker (the default) a web process serves every request on one thread,
switching between them only where one waits on a socket. An answer that computes for
long between two waits holds every other request of its process: beside 10,000
subscribers `GET /subscriptions` as root computes for most of its 1 s (reading the
replies, building the entries, one `json.dumps` of 9.5 MB) and `GET /metrics` for most
of its 0.5 s, beside 10,000 topics `GET /topics` for most of its 0.3 s, and a publish
that came to that process meanwhile waited for them (up to 1.09 s, 0.31 s and 0.42 s
beside one such answer a second: bench.stall). Such an answer now calls `Turns.take`
between small pieces of its work (and hands it to the models and services as their
`turn`, app/turn.py): past TURN_S since its last turn, the process serves whatever else
is ready before it goes on. The answer itself is the same, byte for byte.

Under the gthread worker the interpreter already switches threads every few
milliseconds; taking a turn is then a no-op, and what remains is to never hand it one
long C call (the JSON is encoded an entry at a time here for both)."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import gevent
from flask import Response, current_app
from gevent import monkey

T = TypeVar("T")
TURN_S = 0.005  # the longest an answer computes before it lets the others in
# a positive sleep, not 0: gevent runs a sleep(0)'s greenlet again before it next polls
# the sockets, so the requests waiting on them would not get their turn
YIELD_S = 0.0001
# how often the interpreter hands the GIL from a thread that computes to one that asks
# for it: 5 ms is the interpreter's own, and a publish that needs it four times (its
# reads and writes) beside `offloaded` work waited 20 ms (p99 23-25 ms beside a scrape a
# second); at 0.5 ms while such work runs, 5.5-12 ms
USUAL_SWITCH_S = sys.getswitchinterval()
SWITCH_S = 0.0005


class Turns:
    def __init__(self) -> None:
        self._cooperative = monkey.is_module_patched("socket")
        self._since = time.perf_counter()
        self.taken = 0  # turns taken, for the tests

    def take(self) -> None:
        """Cheap enough to call for every entry: it yields only once TURN_S is past."""
        if not self._cooperative:
            return
        if time.perf_counter() - self._since >= TURN_S:
            gevent.sleep(YIELD_S)
            self.taken += 1
            self._since = time.perf_counter()


@contextmanager
def collections_held() -> Iterator[None]:
    """The cyclic garbage collector held off while a long answer runs. Such an answer
    keeps some hundred thousand containers alive (a dict a subscriber, a tuple a label),
    and each full collection the interpreter ran meanwhile walked them all at once, 40
    to 70 ms that no turn can cut (GET /metrics beside 10,000 subscribers: the longest
    stretch without a turn 46-69 ms with it, 21 ms without). What the answer leaves is
    freed by reference counting as it returns; the collector's next pass, once it is
    back, finds a small heap again. Two such answers at once: the collector is back
    when the first that found it on ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def offloaded(work: Callable[[], T]) -> T:
    """`work` run on a thread of gevent's pool, this request waiting for it as for a
    socket: for pure computing on data in hand (no Redis, no request state) that cannot
    be cut into turns, such as prometheus_client writing a family of 10,000 samples in
    one call. The interpreter then switches between that thread and the one serving the
    other requests every SWITCH_S. Called at once under the gthread worker."""
    if not monkey.is_module_patched("socket"):
        return work()
    sys.setswitchinterval(SWITCH_S)
    try:
        return cast(T, gevent.get_hub().threadpool.apply(work))
    finally:  # two at once: the first to end sets it back (never left at SWITCH_S)
        sys.setswitchinterval(USUAL_SWITCH_S)


def json_array(chunks: Iterable[list[Any]], turns: Turns) -> Response:
    """What `jsonify(list)` answers, byte for byte (compact, the app's JSON settings),
    made an entry at a time: `chunks` may compute each piece lazily, and a turn is
    taken after each one."""
    dumps = current_app.json.dumps
    parts: list[str] = []
    for chunk in chunks:
        for entry in chunk:
            parts.append(dumps(entry, separators=(",", ":")))
            turns.take()
        turns.take()
    return current_app.response_class(f"[{','.join(parts)}]\n", mimetype="application/json")

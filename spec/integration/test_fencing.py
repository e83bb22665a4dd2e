"""Fencing, from outside: workers that are paused past the scrub window, or whose host
clock is wrong, never put a second delivery in flight to a subscriber.

Real `busbar web` and `busbar worker` processes on a real server, a real subscriber that
counts the requests it has open at once, a publisher that keeps publishing throughout.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from spec.integration.bus import Bus, bus, events, fast_scrub
from spec.integration.faults import Publisher, replays
from spec.integration.processes import wait_until
from spec.integration.subscriber import Received, Subscriber, serving

SCRUB_MS = 2500
# where overlap is measured: a callback timeout long enough that a loaded machine does not
# make busbar give up on a request the subscriber is still answering (that retry would
# overlap at the subscriber, busbar having hung up), and the scrub window it needs
SLOW_OK = {"scrub_after_ms": 4000, "timeout_s": 2}
STOCK_URLS = 5


class StockPublisher(Publisher):
    """Updates of a handful of urls on a coalescing route, versions counting up: the
    subscriber must end up with the newest version of each."""

    def _events(self, start: int) -> list[dict]:
        return [
            {"type": "update", "url": f"https://stock.test/{i % STOCK_URLS}", "data": {"v": i}}
            for i in range(start, start + self.chunk)
        ]


def newest(sub: Subscriber) -> dict[str, int]:
    """The version of each stock url in the last acknowledged delivery naming it."""
    found: dict[str, int] = {}
    for event in sub.delivered:
        if event["topic"] == "stock":
            found[event["url"]] = event["data"]["v"]
    return found


def orders_received(sub: Subscriber) -> Subscriber:
    """The subscriber's requests restricted to the orders topic (for the fault helpers)."""
    view = Subscriber()
    for r in sub.received:
        picked = [e for e in r.events if e["topic"] == "orders"]
        if picked:
            view.received.append(Received(r.path, r.user, r.content_type, picked, r.at, r.status))
    return view


def wait_for_orders(sub: Subscriber, wanted: set[int]) -> None:
    def arrived() -> bool:
        return wanted <= {e["data"]["i"] for e in sub.delivered if e["topic"] == "orders"}

    wait_until(arrived, 60, f"{len(wanted)} orders events")


def first_arrivals(sub: Subscriber) -> list[int]:
    seen: dict[int, None] = {}
    for event in sub.delivered:
        if event["topic"] == "orders":
            seen.setdefault(event["data"]["i"], None)
    return list(seen)


def start(b: Bus, sub: Subscriber) -> None:
    b.client("pub"), b.client("sub")
    routes = ["orders", {"topic": "stock", "coalesce": True}]
    b.subscribe("sub", sub.url, routes, max=1, timeout=0)


def test_a_worker_paused_past_the_scrub_window_then_resumed(redis_url: str, tmp_path: Path):
    """SIGSTOP while its delivery is being answered (a long GC pause, a stalled VM), the
    other worker takes over, then SIGCONT: still one delivery in flight, first arrivals
    in publish order, nothing lost, the newest state of every coalesced url delivered."""
    paused: list[int] = []
    victim: list[int] = []
    answered = threading.Event()

    def responder(request: Received) -> tuple[int, float]:
        if victim and not paused and len(sub.received) >= 10:
            os.kill(victim[0], signal.SIGSTOP)  # mid-answer: the reply waits in its socket
            paused.append(victim[0])
            answered.set()
        return 200, 0.05

    sub = Subscriber(responder=responder)
    with serving(sub), bus(redis_url, tmp_path, workers=0, **fast_scrub(**SLOW_OK)) as b:
        start(b, sub)
        victim.append(b.start_worker().pid)
        orders = Publisher(b.base, "pub", "orders", chunk=1, pause=0.12)
        stock = StockPublisher(b.base, "pub", "stock", chunk=1, pause=0.12)
        with orders, stock:
            assert answered.wait(30), "the first worker never delivered"
            b.start_worker()
            time.sleep(SLOW_OK["scrub_after_ms"] / 1000 * 2)  # A is scrubbed, B delivers
            os.kill(paused[0], signal.SIGCONT)
            time.sleep(3)  # both run again, side by side
        wait_for_orders(sub, set(orders.acked))
        last = max(stock.acked)
        wanted = {f"https://stock.test/{i % STOCK_URLS}": i for i in stock.acked}
        wait_until(lambda: newest(sub) == wanted, 60, f"stock up to version {last}")
        assert all(w.poll() is None for w in b.workers), "a worker died"
        log = (tmp_path / "worker0.log").read_text()

    assert sub.max_in_flight == 1
    arrivals = first_arrivals(sub)
    assert arrivals == sorted(arrivals)
    assert replays(orders_received(sub)).partial == 0  # duplicates only as whole batches
    # the woken worker found out: its answer was refused as taken over, or (on a cluster,
    # whose client shares connections between calls) the call met a connection that a
    # timer which ran out during the pause had closed, and the slot gave its job back
    found_out = ("taken over while this worker was paused", "Redis error, retrying")
    assert any(line in log for line in found_out), log


def skewed_clock(tmp_path: Path, seconds: int) -> str:
    """A PYTHONPATH whose sitecustomize sets this process's wall clock `seconds` off,
    as on a host whose clock drifted."""
    folder = tmp_path / "skew"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        f"import time\n_real = time.time\ntime.time = lambda: _real() + {seconds}\n"
    )
    return str(folder)


def test_a_worker_whose_clock_is_an_hour_behind_is_not_taken_for_dead(
    redis_url: str, tmp_path: Path
):
    """Heartbeats and the scrub decision use Redis's clock: with host clocks, the other
    worker would see an hour of silence and scrub a live worker's jobs on every round."""
    sub = Subscriber(responder=lambda _: (200, 0.6))  # a job is held most of the time
    with serving(sub), bus(redis_url, tmp_path, workers=0, **fast_scrub(**SLOW_OK)) as b:
        start(b, sub)
        b.start_worker(PYTHONPATH=skewed_clock(tmp_path, -3600))
        b.start_worker()
        with Publisher(b.base, "pub", "orders", chunk=1, pause=0.4) as orders:
            time.sleep(SLOW_OK["scrub_after_ms"] / 1000 * 2)
        wait_for_orders(sub, set(orders.acked))
        logs = "".join(p.read_text() for p in tmp_path.glob("worker*.log"))
    assert "scrubbed" not in logs
    assert sub.max_in_flight == 1
    assert replays(orders_received(sub)).events == 0


def test_events_still_arrive_in_order_with_two_workers(redis_url: str, tmp_path: Path):
    """The baseline of the two tests above, without faults."""
    sub = Subscriber(responder=lambda _: (200, 0.01))
    with serving(sub), bus(redis_url, tmp_path, workers=2, **fast_scrub(SCRUB_MS)) as b:
        start(b, sub)
        b.publish("pub", "orders", events(30))
        wait_for_orders(sub, set(range(30)))
    assert first_arrivals(sub) == list(range(30))

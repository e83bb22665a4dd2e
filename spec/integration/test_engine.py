"""The delivery engine from outside: `busbar web` and `busbar worker` as processes, real
subscribers. A waiting delivery costs a socket, not a thread: endpoints that never answer
do not hold up the healthy, and one worker carries thousands of deliveries at once.

Marked `layout_free`: what these add is the engine's own (sockets, slots, the failing
share, the open-files check, an answer left unread), which no Redis key touches. Their
Redis part, many subscribers' deliveries begun, acknowledged and failed on every shard,
runs on a cluster in spec/integration/test_origins.py (one event to 300 subscribers) and
the composition matrix (spec/integration/test_matrix.py)."""

from __future__ import annotations

import http.server
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.lua import Scripts
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.counters import totals
from spec.integration.bus import Bus, bus, events
from spec.integration.crowd import MANY_ORIGINS, Crowd, crowd
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving

pytestmark = [pytest.mark.slow, pytest.mark.layout_free]


def subscribe_many(b: Bus, the_crowd: Crowd, names: list[str], path: str, **extra: object) -> None:
    """Clients subscribed to topic `fan` at `path` + their name, straight through the
    stores (the HTTP API would take minutes for thousands; what is stored is the same)."""
    client = b.redis()
    scripts = Scripts(client)
    tokens, store = TokenStore(client, b.keys), SubscriberStore(client, b.keys, scripts)
    now = int(time.time() * 1000)
    for name in names:
        tokens.create(name, name)
        body = {"topics": ["fan"], "callback": the_crowd.url(f"{path}{name}"), **extra}
        store.subscribe(name, parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), now)
    client.close()


def test_endpoints_that_never_answer_do_not_hold_up_the_healthy(
    redis_url: str, redis_client, tmp_path: Path
):
    """200 subscribers whose endpoint accepts and never answers, beside 3 healthy ones:
    with threads, each hole held a thread for BUSBAR_TIMEOUT and the healthy waited
    minutes; here every hole holds a socket and the healthy hear within a second."""
    with crowd() as holes, serving() as healthy, bus(redis_url, tmp_path, **MANY_ORIGINS) as b:
        b.client("pub")
        subscribe_many(b, holes, [f"h{i}" for i in range(200)], "/hole/", timeout=0, max=1)
        for name in ("ok0", "ok1", "ok2"):
            b.client(name)
            b.subscribe(name, f"{healthy.url}/{name}", ["fan"], timeout=0, max=1)
        lags = []
        for i in range(10):
            published = time.time()
            b.publish("pub", "fan", {"type": "create", "url": f"https://o.test/{i}"})
            wait_until(lambda i=i: len(healthy.received) >= 3 * (i + 1), 10, "the healthy")
            lags.append(max(r.at for r in healthy.received[-3:]) - published)
            time.sleep(0.1)
        assert holes.holes_held == 200  # every hole got its request and still holds it
        assert statistics.median(lags) < 0.5 and max(lags) < 2.0, lags


def test_one_worker_carries_thousands_of_deliveries_at_once(
    redis_url: str, redis_client, tmp_path: Path
):
    """2,000 subscribers answering in 6 s each, one event to all: every one has it within
    seconds, and at some moment more than 1,000 requests were in flight together (a
    thread per delivery made the thread count, 96, the most there could be). With 3 s,
    CI's machine under make test's load once sent only 889 before the first answers."""
    with crowd(delay=6.0) as subs, bus(redis_url, tmp_path, **MANY_ORIGINS) as b:
        b.client("pub")
        subscribe_many(b, subs, [f"s{i}" for i in range(2000)], "/s/", timeout=0)
        published = time.time()
        b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
        wait_until(lambda: len(subs.arrivals) == 2000, 30, "2,000 deliveries")
        last = max(at for times in subs.arrivals.values() for at in times)
        assert last - published < 15
        assert subs.max_in_flight > 1000
        client = b.redis()
        acked = lambda: int(totals(client, b.keys).get(b"delivery.events", 0))  # noqa: E731
        # each answer comes 6 s after its arrival, and 2,000 of them are settled by one
        # worker: under make test's four processes on two cores that took over 10 s
        wait_until(lambda: acked() == 2000, 30, "every acknowledgement")
        client.close()


def test_a_redirect_is_a_failure_and_is_not_followed(redis_url: str, redis_client, tmp_path: Path):
    with serving() as target, serving() as sub, bus(redis_url, tmp_path) as b:
        sub.responder = lambda _: (307, 0.0)
        sub.headers_out = {"Location": target.url}
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["fan"], timeout=0, max_attempts=1)
        b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
        wait_until(
            lambda: b.call("GET", "/subscriber/deadletters", "sub").json(), 10, "a dead letter"
        )
        (dead,) = b.call("GET", "/subscriber/deadletters", "sub").json()
        assert dead["last_status"] == "307"
        assert target.received == [] and len(sub.received) == 1


def test_a_worker_says_when_the_open_files_limit_cannot_carry_its_concurrency(
    redis_url: str, redis_client, tmp_path: Path
):
    """A hard limit of 600 open files against 5,000 slots: one line says so and names
    both fixes; the worker still delivers."""
    with serving() as sub, bus(redis_url, tmp_path, workers=0) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["fan"], timeout=0)
        log = tmp_path / "limited.log"

        def limited() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 600))

        with open(log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "busbar", "worker"],
                env=b.env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limited,
            )  # fmt: skip
            try:
                b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
                sub.wait_for(1, 20)  # delivered by this worker: the bus has no other
            finally:
                worker.terminate()
                assert worker.wait(30) == 0
        lines = [line for line in log.read_text().splitlines() if "open-files limit" in line]
        assert len(lines) == 1, lines
        assert "600" in lines[0] and "BUSBAR_DELIVERY_CONCURRENCY=5000" in lines[0]
        assert "ulimit -n" in lines[0]


def test_the_failing_hold_a_bounded_share_of_the_worker(
    redis_url: str, redis_client, tmp_path: Path
):
    """200 endpoints that accept and never answer beside 3 healthy subscribers, on a
    worker of 40 slots whose failing share is 25% (10) and whose attempts count as slow
    after 1 s: the holes' first attempts are cut at 1 s beyond the share, every hole is
    still tried, from then on at most 10 hold a request at once, and the healthy keep
    hearing within a second (without the share, the holes would take all 40 slots for
    BUSBAR_TIMEOUT, 20 s, at a time: 200 x 20 s / 40 = 100 s for everyone)."""
    env = {"BUSBAR_DELIVERY_CONCURRENCY": "40", "BUSBAR_FAILING_SHARE": "25",
           "BUSBAR_SLOW_AFTER_S": "1", **MANY_ORIGINS}  # fmt: skip
    with crowd() as holes, serving() as healthy, bus(redis_url, tmp_path, **env) as b:
        b.client("pub")
        subscribe_many(b, holes, [f"h{i}" for i in range(200)], "/hole/", timeout=0, max=1)
        for name in ("ok0", "ok1", "ok2"):
            b.client(name)
            b.subscribe(name, f"{healthy.url}/{name}", ["fan"], timeout=0, max=1)
        lags, held = [], []
        first_attempts: float | None = None  # when every hole had had its first attempt
        started, i = time.time(), 0
        while _more(i, first_attempts, started):
            published = time.time()
            b.publish("pub", "fan", {"type": "create", "url": f"https://o.test/{i}"})
            wait_until(lambda i=i: len(healthy.received) >= 3 * (i + 1), 20, "the healthy")
            lags.append(max(r.at for r in healthy.received[-3:]) - published)
            if first_attempts is None and _holes_tried(holes) == 200:
                first_attempts = time.time()
            # counted once the last first attempt is cut (1 s) beyond the share: about
            # 7 s in (200 x 1 s over 30 slots), later under the full suite's load
            if first_attempts is not None and time.time() - first_attempts > 1.5:
                held.append(holes.holes_open)
            time.sleep(0.2)
            i += 1
        counters = totals(redis_client, b.keys)
    # every hole was tried (once per event at least); later events wait their turn
    took = f"in {time.time() - started:.0f} s"
    assert first_attempts is not None, f"{_holes_tried(holes)} of 200 holes tried {took}"
    assert held and max(held) <= 10, held
    assert int(counters.get(b"delivery.held_back", 0)) > 0
    # the first event waited behind the holes' first attempts (200 x 1 s over 30 slots);
    # after that, the healthy are served at once
    assert lags[0] < 12.0, lags
    # within a second, as the docstring says (0.15-0.25 s median here; 0.2 was missed
    # once under the full suite's load on a cluster): without the share, 20 s
    assert statistics.median(lags[1:]) < 0.5 and max(lags[1:]) < 2.0, lags


def _more(published: int, first_attempts: float | None, started: float) -> bool:
    """60 events at least, and then until every hole has been tried and the share has
    been watched for 3 s: about 7 s in alone, 167 holes after 22 s once under a loaded
    CI machine (every one still tried, later); 120 s at most."""
    if published < 60:
        return True
    watched = first_attempts is not None and time.time() - first_attempts > 4.5
    return not watched and time.time() - started < 120


def _holes_tried(holes: Crowd) -> int:
    return len({path for path in list(holes.arrivals) if path.startswith("/hole/")})


class HugeAnswer(http.server.BaseHTTPRequestHandler):
    """Acknowledges with a 96 MiB body, written 64 KiB at a time; keeps, per request, how
    much of it went out before the client hung up (`sent`, a class attribute)."""

    SIZE, CHUNK = 96 << 20, 64 << 10
    sent: list[int] = []  # noqa: RUF012

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", str(self.SIZE))
        self.end_headers()
        sent, chunk = 0, b"x" * self.CHUNK
        try:
            while sent < self.SIZE:
                self.wfile.write(chunk)
                sent += self.CHUNK
        except OSError:
            self.close_connection = True
        HugeAnswer.sent.append(sent)

    def log_message(self, *args: object) -> None:
        pass


def test_a_huge_answer_is_not_read(redis_url: str, redis_client, tmp_path: Path):
    """Issue 23 item 7: a subscriber acknowledging with a 96 MiB body. The worker reads
    a few KiB of it, counts the status and hangs up rather than drain the rest (the
    thread engine read it whole: a 192 MiB answer grew the worker by 192 MiB): only what
    the sockets' buffers hold ever leaves the subscriber, and every event is
    acknowledged."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HugeAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/in"
    HugeAnswer.sent = []
    try:
        with bus(redis_url, tmp_path) as b:
            b.client("pub"), b.client("sub")
            b.subscribe("sub", url, ["orders"], max=1, timeout=0)
            b.publish("pub", "orders", events(3))
            wait_until(lambda: b.subscription("sub")["events"]["sent"] == 3, 20, "three acks")
            wait_until(lambda: len(HugeAnswer.sent) == 3, 10, "the subscriber's writes to end")
    finally:
        server.shutdown()
    assert max(HugeAnswer.sent) < 16 << 20, HugeAnswer.sent  # of 96 MiB each

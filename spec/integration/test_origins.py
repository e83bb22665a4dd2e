"""Connections per origin, bounded, from outside: a `busbar worker` delivering one event
to 40 subscribers whose callbacks are paths of one ordinary threaded HTTP server (the
standard library's, accept backlog 5) that answers in 50 ms. The server never has more
connections open than BUSBAR_ORIGIN_CONNECTIONS, every subscriber has its event once,
and no attempt fails: the deliveries past the bound wait their turn. With the product's
defaults, 300 of them: the limit adapts, and still nothing fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.services.counters import totals
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import wait_until


class CountingServer(ThreadingHTTPServer):
    """Counts the connections it holds (a connection is a thread here) and each path's
    requests."""

    daemon_threads = True

    def __init__(self, answer_s: float = 0.05) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer_s = answer_s  # how long each request takes to answer
        self.lock = threading.Lock()
        self.open = self.most_open = self.accepted = 0
        self.arrivals: dict[str, int] = {}

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.open += 1
            self.accepted += 1
            self.most_open = max(self.most_open, self.open)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.lock:
                self.open -= 1


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CountingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.server.answer_s)
        with self.server.lock:
            self.server.arrivals[self.path] = self.server.arrivals.get(self.path, 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def counting(
    answer_s: float = 0.05, kind: type[CountingServer] = CountingServer
) -> Iterator[CountingServer]:
    server = kind(answer_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_subscribers_sharing_an_origin_share_its_bounded_connections(
    redis_url: str, redis_client, tmp_path: Path
):
    env = {"BUSBAR_ORIGIN_CONNECTIONS": "3", "BUSBAR_ORIGIN_CONNECTIONS_MAX": "3",
           "BUSBAR_ORIGIN_CONNECTING": "2"}  # fmt: skip
    with counting() as origin, bus(redis_url, tmp_path, **env) as b:
        port = origin.server_address[1]
        b.client("pub")
        for i in range(40):
            b.client(f"s{i}")
            b.subscribe(f"s{i}", f"http://127.0.0.1:{port}/s/{i}", ["fan"], timeout=0, max=1)
        b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
        wait_until(lambda: len(origin.arrivals) == 40, 30, "all 40 subscribers' events")
        assert origin.most_open <= 3, origin.most_open
        assert origin.accepted <= 3 * 2  # kept alive and reused (a reconnect now and then)
        client = b.redis()
        wait_until(lambda: int(totals(client, b.keys).get(b"delivery.events", 0)) == 40, 10,
                   "every acknowledgement")  # fmt: skip
        counted = totals(client, b.keys)
        client.close()
    assert set(origin.arrivals.values()) == {1}
    assert int(counted.get(b"delivery.failures", 0)) == 0


def test_the_origins_limit_is_shown_to_root_and_in_metrics(
    redis_url: str, redis_client, tmp_path: Path
):
    """The same fan-out with the product's defaults: the worker reports what it learnt
    of the origin (app/services/origin_limits.py), and root sees it in GET /origins (the
    console's table) and GET /metrics; a client is refused it; no path is shown."""
    with counting() as origin, bus(redis_url, tmp_path) as b:
        port = origin.server_address[1]
        b.client("pub")
        for i in range(40):
            b.client(f"s{i}")
            b.subscribe(f"s{i}", f"http://127.0.0.1:{port}/s/{i}/secret", ["fan"],
                        timeout=0, max=1)  # fmt: skip
        b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
        wait_until(lambda: len(origin.arrivals) == 40, 30, "all 40 subscribers' events")

        def shown() -> list[dict]:
            return b.call("GET", "/origins", ROOT_KEY).json()

        wait_until(lambda: [r["waiting"] for r in shown()] == [0], 15,
                   "the worker's report of its origin, nothing waiting")  # fmt: skip
        (row,) = shown()
        assert row["origin"] == f"http://127.0.0.1:{port}"
        assert row["limit"] >= 2 and row["ceiling"] == 4096 and row["workers"] == 1, row
        assert row["open"] <= row["limit"], row
        assert row["reason"] and row["changed_ms"] >= 0, row
        metrics = b.call("GET", "/metrics", ROOT_KEY).text
        assert f'busbar_origin_connections_limit{{origin="http://127.0.0.1:{port}"}}' in metrics
        assert "secret" not in metrics and "/s/" not in metrics  # a path may hold one
        assert b.call("GET", "/origins", "pub").status_code == 403


def test_a_fan_out_past_the_start_of_the_limit_fails_nothing_the_origin_could_serve(
    redis_url: str, redis_client, tmp_path: Path
):
    """One event to 300 subscribers on the threaded server, with the product's defaults:
    more than the limit's start (64), so the worker learns the origin as it goes (its
    accept queue of 5 drops the connects of a burst now and then, which are signs to the
    limit, not failures: app/delivery/origin_limit.py). Every subscriber has the event
    once and no attempt fails."""
    count = 300
    with counting() as origin, bus(redis_url, tmp_path) as b:
        port = origin.server_address[1]
        b.client("pub")
        for i in range(count):
            b.client(f"s{i}")
            b.subscribe(f"s{i}", f"http://127.0.0.1:{port}/s/{i}", ["fan"], timeout=0, max=1)
        b.publish("pub", "fan", {"type": "create", "url": "https://o.test/1"})
        wait_until(lambda: len(origin.arrivals) == count, 60, "every subscriber's event")
        client = b.redis()
        wait_until(lambda: int(totals(client, b.keys).get(b"delivery.events", 0)) == count,
                   10, "every acknowledgement")  # fmt: skip
        counted = totals(client, b.keys)
        client.close()
    assert set(origin.arrivals.values()) == {1}
    assert int(counted.get(b"delivery.failures", 0)) == 0
    assert origin.most_open > 5  # more at once than its accept queue holds

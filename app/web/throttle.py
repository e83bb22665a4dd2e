"""Failed logins throttled per source address: credentials that fail (a 401) count against
the address they came from, and past BUSBAR_AUTH_FAILURES_PER_MINUTE in a minute every
request with credentials from it is answered 429 with Retry-After until that minute
ends, the right token included: otherwise a guesser would learn from the one answer
that differs. Without the limit one connection tried about 1,100 tokens a second.

The count is kept in each web process's memory (no Redis round trip on any request):
with BUSBAR_WEB_WORKERS processes an address gets up to that many times the limit,
which still turns thousands of guesses a second into a few a second. Behind a proxy
every client shares the proxy's address, so one client's failures would throttle the
rest: let the proxy throttle, and set the limit to 0 (off). Memory is bounded: at
most REMEMBERED addresses, the oldest forgotten first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from flask import Flask, Response, request

from app.web.errors import error_response

WINDOW_S = 60.0
REMEMBERED = 10_000


class FailedLogins:
    def __init__(self, per_minute: int) -> None:
        self._limit = per_minute
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()  # started, failures

    def wait_s(self, address: str) -> int:
        """Seconds `address` must wait before credentials are heard again; 0: none."""
        if self._limit <= 0:
            return 0
        with self._lock:
            started, failures = self._seen.get(address, (0.0, 0))
        left = started + WINDOW_S - time.monotonic()
        return int(left) + 1 if failures >= self._limit and left > 0 else 0

    def failed(self, address: str) -> None:
        if self._limit <= 0:
            return
        now = time.monotonic()
        with self._lock:
            started, failures = self._seen.pop(address, (now, 0))
            if now - started >= WINDOW_S:
                started, failures = now, 0
            self._seen[address] = (started, failures + 1)
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)


def install(app: Flask, logins: FailedLogins) -> None:
    """Refuse credentials from a throttled address before anything else runs; count
    every 401 answered to a request that carried credentials."""

    def refuse() -> Response | None:
        if "Authorization" not in request.headers:
            return None
        wait = logins.wait_s(request.remote_addr or "")
        if not wait:
            return None
        response = error_response(
            429, f"too many failed logins from this address; try again in {wait} s"
        )
        response.headers["Retry-After"] = str(wait)
        return response

    def count(response: Response) -> Response:
        if response.status_code == 401 and "Authorization" in request.headers:
            logins.failed(request.remote_addr or "")
        return response

    app.before_request(refuse)
    app.after_request(count)

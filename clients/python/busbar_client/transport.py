"""HTTP to the bus: Basic auth with the token, timeouts, and retries with backoff where a
retry is safe (a 503, a 429 that wrote nothing, or no answer at all), honouring the
bus's Retry-After."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from busbar_client.errors import ConnectionFailed, Unavailable, for_status

RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` more attempts after the first; waits backoff x 2^n, jittered x0.5..1,
    at most max_wait seconds, or what Retry-After asks (capped the same)."""

    retries: int = 3
    backoff: float = 0.2
    max_wait: float = 5.0

    def wait(self, attempt: int, retry_after: str | None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_wait)
        return min(self.backoff * 2**attempt, self.max_wait) * random.uniform(0.5, 1.0)


class Transport:
    def __init__(
        self,
        url: str,
        token: str,
        timeout: float,
        policy: RetryPolicy,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._base = url.rstrip("/")
        self._auth = (token, "")
        self._timeout = timeout
        self._policy = policy
        self._session = session or requests.Session()
        self._sleep = sleep

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        retry: bool = True,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> requests.Response:
        """The answer if 2xx; else the error for its status, the server's message in it.
        With retry=False (not safe to repeat) one attempt only."""
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        sent = {"Content-Type": "application/json", **(headers or {})}
        attempts = 1 + (self._policy.retries if retry else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._session.request(
                    method, self._base + path, data=data, headers=sent, params=params,
                    auth=self._auth, timeout=self._timeout, allow_redirects=False,
                )  # fmt: skip
            except requests.RequestException as exc:
                if last:
                    raise ConnectionFailed(f"{method} {path}: {type(exc).__name__}") from None
                self._sleep(self._policy.wait(attempt, None))
                continue
            if response.status_code < 300:
                return response
            if response.status_code in RETRY_STATUSES and not last:
                self._sleep(self._policy.wait(attempt, response.headers.get("Retry-After")))
                continue
            raise for_status(response.status_code, message_of(response))
        raise Unavailable(f"{method} {path}: no attempt made")  # attempts is at least 1


def message_of(response: requests.Response) -> str:
    """The bus's `{"error": ...}`, else the beginning of whatever it sent."""
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason or "no message"

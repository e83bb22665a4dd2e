"""The engine's callback client: one HTTP/1.1 POST at a time per connection, with what a
bus must add and nothing it must not.

- The address check: a host written as an address (in any spelling) or a localhost
  name is judged here, as written; a name is resolved and every address it resolves to
  is judged before anything connects (app/delivery/origins.py). A refusal is
  CallbackRefused: a failed attempt, never a crash.
- No proxy from the environment (nothing here reads it), no redirect followed (a 3xx
  is the callback's answer, and a failure), no cookies kept.
- TLS verified against the public CAs (certifi's bundle), the operator's bundle
  (BUSBAR_CA_BUNDLE), or not at all (BUSBAR_SSL_VERIFY=0).
- A total deadline: BUSBAR_TIMEOUT bounds the whole request, connect included (which
  BUSBAR_CONNECT_TIMEOUT bounds alone too), so a callback that trickles bytes is cut.
- A bounded answer: only the status and Retry-After matter, and at most MAX_ANSWER
  bytes of the body are read; a longer body closes the connection instead of being
  drained (app/delivery/http1.py).
- Keep-alive: connections are kept per origin; a kept-alive connection the server
  closed as it was reused (before a byte of the answer) is retried once on a new one,
  as a duplicate is what at-least-once allows and failing would back off a healthy
  subscriber.
- Bounded per origin (app/delivery/gate.py): a delivery waits its turn for a connection
  of its callback's origin, up to Timeouts.wait, before BUSBAR_TIMEOUT starts; the send
  step asks for it first (connection()), so the wait is never taken for a slow answer.
  Each answer's status and time (or its absence) are told to the origin's limit, which
  adapts (app/delivery/origin_limit.py).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

from app.delivery.answer import Answer
from app.delivery.dialer import Origin
from app.delivery.gate import Limits
from app.delivery.http1 import Connection
from app.delivery.identities import Identity
from app.delivery.origins import Origins
from app.errors import CallbackRefused, Disconnected
from app.models.callback_policy import PRODUCTION, Policy
from app.services.origin_limits import OriginRow
from config.settings import Settings

USER_AGENT = "busbar"
REMEMBERED = 100_000  # callbacks whose address check is kept (a POST parsed it each time)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    total: float
    wait: float = 7.5  # for a connection of a busy origin, before `total` starts


DEFAULT_TIMEOUTS = Timeouts(2.0, 20.0)  # BUSBAR_CONNECT_TIMEOUT, BUSBAR_TIMEOUT defaults


def client_options(settings: Settings) -> dict[str, Any]:
    """The engine's CallbackClient arguments, from the settings. A delivery waits for its
    origin's connection at most BUSBAR_TIMEOUT, and at most a quarter of the scrub
    window: its lease (half the window, app/delivery/steps.py) must outlast the wait."""
    wait = min(settings.timeout, settings.scrub_after_ms / 4000)
    return {
        "policy": Policy.of(settings),
        "verify": settings.callback_verify,
        "timeouts": Timeouts(settings.connect_timeout, settings.timeout, wait),
        "limits": Limits(
            settings.origin_connections,
            settings.origin_connecting,
            settings.origin_connections_max,
        ),
        "client_cert": (
            (settings.client_cert, settings.client_key) if settings.client_cert else None
        ),
    }


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context callbacks are verified with: public CAs, a bundle's, or none."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif isinstance(verify, str):
        context = ssl.create_default_context(cafile=verify)
    else:
        import certifi  # the same public CAs as requests

        context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])  # the one protocol this client speaks
    return context


class Request(NamedTuple):
    """A callback, parsed once: where it connects, and the start of its request."""

    origin: Origin
    start: bytes  # the request line and Host


class CallbackClient:
    """One per engine, made inside its event loop; connections kept per origin."""

    def __init__(
        self,
        *,
        policy: Policy = PRODUCTION,
        verify: bool | str = True,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        limits: Limits = Limits(),  # noqa: B008  # frozen: one shared default is safe
        client_cert: tuple[str, str | None] | None = None,
    ) -> None:
        """`client_cert`: the bus's own (certificate, key) files (BUSBAR_CLIENT_CERT/KEY),
        presented where a subscription has none of its own."""
        self.policy = policy
        self.verify = verify
        self._timeouts = timeouts
        # by callback: its request's start, or why it is refused; by user: its Authorization
        self._known: dict[str, Request | str] = {}
        self._auths: dict[str, bytes] = {}
        context = tls_context(verify)
        if client_cert is not None:
            context.load_cert_chain(*client_cert)
        self._origins = Origins(policy, context, timeouts.connect, limits)

    async def connection(
        self, url: str, identity: Identity | None = None, park_until: float | None = None
    ) -> Connection:
        """A connection to the callback's origin for exchange(): kept alive, or new within
        the origin's bounds, waiting in line up to Timeouts.wait (OriginBusy past it), or
        parked until `park_until` (time.monotonic(); app/delivery/parking.py).
        CallbackRefused, or what connecting raises, as exchange() says. `identity`: the
        subscription's own client certificate, on https."""
        origin = self._origin(url, identity)
        return await self._origins.connection(origin, self._timeouts.wait, park_until)

    def stop_waiting(self) -> None:
        """The worker stops: what waits for a connection is held back now."""
        self._origins.stop_waiting()

    def _origin(self, url: str, identity: Identity | None) -> Origin:
        origin = self._request(url).origin
        if identity is None or not origin.tls:
            return origin
        self._origins.know(identity.name, identity.context)
        return origin._replace(identity=identity.name)

    def _request(self, url: str) -> Request:
        request = self._known.get(url)
        if request is None:
            request = self._known[url] = self._judged(url)
            if len(self._known) > REMEMBERED:
                self._known.clear()
        if isinstance(request, str):
            raise CallbackRefused(request)
        return request

    async def exchange(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        user: str,
        connection: Connection | None = None,
        bearer: str | None = None,
        identity: Identity | None = None,
        *,
        authorization: str | None = None,
        limit: int = 0,
        timed: bool = True,
    ) -> Answer:
        """POST with HTTP Basic `user:x` (or a `bearer` token in its place, or the whole
        `authorization` value, "" for none): the answer's status and what else of it a
        delivery reads (with `limit`, its body up to that many bytes), on `connection`
        (from connection()) or on one waited for within the deadline. Raises what
        connecting raises (OSError, ssl.SSLError: app/services/failure.py names it),
        BadAnswer, Disconnected, TimeoutError, or CallbackRefused. Not `timed`: the caller
        bounds it (a second asyncio timeout of the same length on every delivery was
        5% of the worker's samples under bench.fanout: docs/performance.md)."""
        request = self._request(url)
        if authorization is not None:
            auth = b"Authorization: %s\r\n" % authorization.encode() if authorization else b""
        elif bearer is not None:
            auth = b"Authorization: Bearer %s\r\n" % bearer.encode()
        else:
            auth = self._auths.get(user) or b""
            if not auth:
                auth = self._auths[user] = _auth(user)
                if len(self._auths) > REMEMBERED:
                    self._auths.clear()
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if (
            fields.count("\n") != len(headers)
            or fields.count("\r") != len(headers)
            or (auth.count(b"\n") > 1 or auth.count(b"\r") > 1)
        ):
            if connection is not None:
                connection.close()  # given back: its origin's count goes down
            raise ValueError("a header with a line break")  # a bug: never sent
        message = b"".join((
            request.start, auth, fields.encode("latin-1"),
            b"Content-Length: %d\r\n\r\n" % len(body), body,
        ))  # fmt: skip
        origin = self._origin(url, identity)
        async with asyncio.timeout(self._timeouts.total) if timed else nullcontext():
            if connection is None:
                connection = await self._origins.connection(origin, self._timeouts.wait)
            try:
                return await self._ask(origin, connection, message, limit)
            except Disconnected as exc:
                if not exc.stale:
                    raise
            return await self._ask(origin, await self._origins.fresh(origin), message, limit)

    async def _ask(
        self, origin: Origin, connection: Connection, message: bytes, limit: int = 0
    ) -> Answer:
        origins = self._origins
        started, load = time.monotonic(), origins.load(origin)
        try:
            answer, reusable = await connection.ask(message, limit)
        except BaseException as exc:
            connection.close()  # cut off mid-answer (or timed out): out of step for good
            if isinstance(exc, asyncio.CancelledError | TimeoutError):  # its deadline
                origins.answered(origin, time.monotonic() - started, None, load)
            raise
        if reusable:
            origins.release(origin, connection)
        else:
            connection.close()
        origins.answered(origin, time.monotonic() - started, answer.status, load)
        return answer

    def _judged(self, url: str) -> Request | str:
        """The callback parsed once, or why it is refused. A name is judged on every
        connection (origins.py); an address as written, here, in every spelling (a
        resolver would take `127.1` for 127.0.0.1: this says why first)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        refusal = self.policy.written(host)
        if refusal is not None:
            return f"{host}: {refusal}"
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
        authority = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
        if parts.port is not None and port != (443 if tls else 80):
            authority += f":{port}"
        target = quote(parts.path or "/", safe="/%!$&'()*+,;=:@-._~")
        if parts.query:
            target += "?" + quote(parts.query, safe="/?%!$&'()*+,;=:@-._~")
        start = f"POST {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {USER_AGENT}\r\n"
        return Request(Origin(tls, ascii_host, port), start.encode("ascii"))

    def origins(self, most: int) -> list[OriginRow]:
        """The busiest origins' connections and limits (Origins.report)."""
        return self._origins.report(most)

    async def close(self) -> None:
        self._origins.close()


def _auth(user: str) -> bytes:
    """The Authorization field of Basic `user:x`, and its line end."""
    return b"Authorization: Basic " + base64.b64encode(f"{user}:x".encode()) + b"\r\n"

"""The engine's callback client: aiohttp, with what a bus must add and nothing it must not.

- The address check (app/models/callback_policy.py): every address a host name
  resolves to is judged before aiohttp may connect, and only allowed ones are tried, so
  no packet reaches a refused address (a name that also resolves to a metadata or
  loopback address, or rebinds to one, reaches only its allowed addresses). A host
  written as an address is judged as written, since aiohttp does not resolve those. A
  refusal is CallbackRefused: a failed attempt, never a crash.
- No proxy from the environment (trust_env off), no redirect followed (a 3xx is the
  callback's answer, and a failure), no cookies kept.
- TLS verified against the public CAs (certifi's bundle), the operator's bundle
  (BUSBAR_CA_BUNDLE), or not at all (BUSBAR_SSL_VERIFY=0).
- A total deadline: BUSBAR_TIMEOUT bounds the whole request, connect included (which
  BUSBAR_CONNECT_TIMEOUT bounds alone too), so a callback that trickles bytes is cut.
- A bounded answer: only the status matters, and at most MAX_ANSWER bytes of the body
  are read; a longer body closes the connection instead of being drained.
- Keep-alive: aiohttp pools connections per origin; a kept-alive connection the server
  closed as it was reused (before any answer: aiohttp says so as a disconnection or as
  a failed write) is retried once on a new one, as a duplicate is what at-least-once
  allows and failing would back off a healthy subscriber.
"""

from __future__ import annotations

import base64
import contextvars
import ipaddress
import socket
import ssl
import weakref
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from app.errors import CallbackRefused
from app.models.callback_policy import PRODUCTION, Policy
from config.settings import Settings

MAX_ANSWER = 4096  # bytes of a callback's answer read at most
USER_AGENT = "busbar"
REMEMBERED = 100_000  # callbacks whose address check is kept (a POST parsed it each time)


class Answer(NamedTuple):
    status: int
    retry_after: str | None  # the header, as sent (app/delivery/backpressure.py reads it)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    total: float


DEFAULT_TIMEOUTS = Timeouts(2.0, 20.0)  # BUSBAR_CONNECT_TIMEOUT, BUSBAR_TIMEOUT defaults


def client_options(settings: Settings) -> dict[str, Any]:
    """The engine's CallbackClient arguments, from the settings."""
    return {
        "policy": Policy.of(settings),
        "verify": settings.callback_verify,
        "timeouts": Timeouts(settings.connect_timeout, settings.timeout),
    }


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context callbacks are verified with: public CAs, a bundle's, or none."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    import certifi  # the same public CAs as requests

    return ssl.create_default_context(cafile=certifi.where())


class CheckedResolver(AbstractResolver):
    """Resolves, then keeps only the addresses the policy allows for this host name."""

    def __init__(self, policy: Policy) -> None:
        self._inner = aiohttp.ThreadedResolver()
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        allowed, refusal = [], None
        for result in found:
            judged = self._policy.refusal(ipaddress.ip_address(result["host"]), host)
            if judged is None:
                allowed.append(result)
            else:
                refusal = refusal or judged
        if not allowed and refusal is not None:
            raise CallbackRefused(f"{host} resolves to {refusal}")
        return allowed

    async def close(self) -> None:
        await self._inner.close()


# the request under way in this task, told whether it went out on a kept-alive connection
_ASKING: contextvars.ContextVar[SimpleNamespace | None] = contextvars.ContextVar(
    "busbar_asking", default=None
)


class _Connector(aiohttp.TCPConnector):
    """A TCPConnector that tells the request whether its connection was used before.
    aiohttp's tracing says so too, but builds a signal's parameters for every step of
    every request: about 5% of a busy engine's CPU, for this one bit."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._used: weakref.WeakSet[Any] = weakref.WeakSet()  # protocols that sent a request

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        connection = await super().connect(req, traces, timeout)
        asking, protocol = _ASKING.get(), connection.protocol
        if protocol in self._used:
            if asking is not None:
                asking.reused = True
        else:
            self._used.add(protocol)
        return connection


class CallbackClient:
    """One per engine, made inside its event loop; connections pooled per origin."""

    def __init__(
        self,
        *,
        policy: Policy = PRODUCTION,
        verify: bool | str = True,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        self.policy = policy
        # by callback: its parsed URL and what _refusal said; by user: its Authorization
        self._known: dict[str, tuple[URL, str | None]] = {}
        self._auths: dict[str, str] = {}
        connector = _Connector(
            limit=0,  # unbounded here: the engine's slots bound the connections in use
            limit_per_host=0,
            ssl=tls_context(verify),
            resolver=CheckedResolver(policy),
            ttl_dns_cache=10,
            enable_cleanup_closed=False,
        )
        self._timeout = aiohttp.ClientTimeout(
            total=timeouts.total, connect=timeouts.connect, sock_connect=timeouts.connect
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )

    async def post(self, url: str, body: bytes, headers: dict[str, str], user: str) -> int:
        """POST with HTTP Basic `user:x`; the status code. Raises what aiohttp raises
        (app/services/failure.py names it), TimeoutError, or CallbackRefused."""
        return (await self.exchange(url, body, headers, user)).status

    async def exchange(self, url: str, body: bytes, headers: dict[str, str], user: str) -> Answer:
        """post(), and what of the answer besides its status a delivery reads."""
        known = self._known.get(url)
        if known is None:
            known = self._known[url] = self._judged(url)
            if len(self._known) > REMEMBERED:
                self._known.clear()
        target, refusal = known
        if refusal is not None:
            raise CallbackRefused(refusal)
        auth = self._auths.get(user)
        if auth is None:
            auth = self._auths[user] = "Basic " + base64.b64encode(f"{user}:x".encode()).decode()
            if len(self._auths) > REMEMBERED:
                self._auths.clear()
        sent = {**headers, "Authorization": auth, "User-Agent": USER_AGENT}
        asking = SimpleNamespace(reused=False)
        _ASKING.set(asking)
        try:
            return await self._exchange(target, body, sent)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            # a kept-alive connection closed under the request shows as either, by when
            # the close is seen: writing the request, or waiting for its answer
            if not asking.reused:
                raise
        finally:
            _ASKING.set(None)
        return await self._exchange(target, body, sent)

    def _judged(self, url: str) -> tuple[URL, str | None]:
        """The callback parsed once (aiohttp would parse the string on every POST), and
        why it is refused, if it is."""
        return URL(url), self._refusal(url)

    def _refusal(self, url: str) -> str | None:
        """Why a callback written with a refused address is refused, or None. A name is
        judged by the resolver, on every connection; an address as written, here (in
        every spelling: aiohttp would hand `127.1` to the resolver, this says why first)."""
        host = urlsplit(url).hostname or ""
        refusal = self.policy.written(host)
        return None if refusal is None else f"{host}: {refusal}"

    async def _exchange(self, url: URL, body: bytes, headers: dict[str, str]) -> Answer:
        async with self._session.post(
            url, data=body, headers=headers, allow_redirects=False, timeout=self._timeout
        ) as response:
            read = 0
            while read <= MAX_ANSWER:
                chunk = await response.content.read(MAX_ANSWER + 1 - read)
                if not chunk:
                    break
                read += len(chunk)
            if read > MAX_ANSWER:
                response.close()  # not drained: the connection is not reused
            return Answer(response.status, response.headers.get("Retry-After"))

    async def close(self) -> None:
        await self._session.close()

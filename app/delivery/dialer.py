"""How a worker reaches a callback origin: resolved and checked, then connected.

- The address check (app/models/callback_policy.py): every address a host name resolves
  to is judged before anything connects, and only allowed ones are tried, so no packet
  reaches a refused address (a name that also resolves to a metadata or loopback
  address, or rebinds to one, reaches only its allowed addresses). What a name resolved
  to is kept DNS_TTL_S; a refusal is CallbackRefused, a failed attempt.
- TLS verified against the context the client was given, or the subscription's own
  client certificate's (an identity), with the host name as SNI and the name checked.
- Each address is given BUSBAR_CONNECT_TIMEOUT to connect; its failure tries the next.

How many connections an origin is asked for, and who waits for one, is app/delivery/
origins.py's business; this module only dials.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from typing import NamedTuple

from app.delivery.http1 import Connection
from app.errors import CallbackRefused
from app.models.callback_policy import Policy

DNS_TTL_S = 10.0
REMEMBERED = 100_000  # names whose addresses are kept, at most
REMEMBERED_IDENTITIES = 1024  # client certificates' contexts kept, at most


class Origin(NamedTuple):
    tls: bool
    host: str  # as connected to and checked: lowercase, ASCII (IDNA), no brackets
    port: int
    # the TLS client certificate its connections present (app/delivery/identities.py):
    # "" the bus's own context; connections of one identity never carry another's
    identity: str = ""


class Dialer:
    def __init__(self, policy: Policy, tls: ssl.SSLContext, connect_timeout: float) -> None:
        self._policy = policy
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._resolved: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self._identities: dict[str, ssl.SSLContext] = {}

    def know(self, name: str, context: ssl.SSLContext) -> None:
        """The context an Origin naming this identity connects with."""
        if name not in self._identities and len(self._identities) >= REMEMBERED_IDENTITIES:
            self._identities.clear()  # each call makes its identity known again first
        self._identities[name] = context

    async def connect(self, origin: Origin, timeout: float | None = None) -> Connection:
        """A new connection to the first allowed address that takes it, each address
        given `timeout` (BUSBAR_CONNECT_TIMEOUT by default)."""
        loop = asyncio.get_running_loop()
        failure: OSError | None = None
        tls = self._identities[origin.identity] if origin.identity else self._tls
        for address in await self.addresses(origin.host, origin.port):
            try:
                async with asyncio.timeout(timeout or self._connect_timeout):
                    _, connection = await loop.create_connection(
                        Connection, address, origin.port,
                        ssl=tls if origin.tls else None,
                        server_hostname=origin.host if origin.tls else None,
                    )  # fmt: skip
                return connection
            except ssl.SSLError:
                raise  # the certificate or the handshake: another address would not mend it
            except OSError as exc:  # refused, unreachable, timed out: try the next one
                failure = exc
        assert failure is not None  # addresses never answers an empty list
        raise failure

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to that the policy allows, kept DNS_TTL_S (a
        broker's too: app/delivery/nats_publisher.py)."""
        now = time.monotonic()
        known = self._resolved.get((host, port))
        if known is not None and now - known[0] < DNS_TTL_S:
            return known[1]
        found = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        allowed: list[str] = []
        refusal = None
        for *_, sockaddr in found:
            address = str(sockaddr[0])
            judged = self._policy.refusal(ipaddress.ip_address(address), host)
            if judged is None:
                if address not in allowed:
                    allowed.append(address)
            else:
                refusal = refusal or judged
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, "no address")
        if not allowed:
            raise CallbackRefused(f"{host} resolves to {refusal}")
        if len(self._resolved) >= REMEMBERED:
            self._resolved.clear()
        self._resolved[(host, port)] = (now, allowed)
        return allowed

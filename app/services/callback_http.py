"""The HTTP client a delivery thread calls callbacks with: the standard library's
http.client, one keep-alive connection per callback origin, and nothing else.

Why not requests (or urllib3 alone): measured on the CI machine, a keep-alive POST cost
about 450 µs of client CPU through requests, 160 µs through urllib3 and 35 µs through
http.client. A worker process delivering to a thousand subscribers at once is bound by
that CPU (one GIL), so it decides how soon the last subscriber hears of an event; what
the bigger clients add (cookies, proxies, .netrc, redirects, retries, hooks) is what
busbar must not do to a callback anyway.

What this adds to http.client is what a bus needs:
- The address check. Subscribe time can only judge a callback host written as an
  address; a name can resolve anywhere, and resolve elsewhere tomorrow. So each new
  connection checks the address it reached, after the TCP connect and before a byte of
  the request is sent: a name pointing at a metadata service (or rebinding to one) is
  refused whatever DNS said (CallbackRefused: a failed attempt, never a crash).
- Timeouts: BUSBAR_CONNECT_TIMEOUT for the connect, BUSBAR_TIMEOUT for each read, and a
  total deadline (app/services/deadline.py) the connection registers itself with.
- TLS verified against the public CAs (certifi's bundle, as requests did), a CA bundle
  of the operator's (BUSBAR_CA_BUNDLE), or not at all (BUSBAR_SSL_VERIFY=0).
- Keep-alive with care: a connection idle for a second or more is looked at before it
  is reused, and one the server has closed (it reads as closed) is replaced, so a POST
  is not sent into a socket that died long ago. One used within the second is not: the
  look is a system call on every delivery, and a busy worker's thousands of them cost
  more than the rare server that hangs up that soon, which the retry below handles as
  it handles a close that crosses the request anyway. No proxy is ever used, whatever
  the environment says.
"""

from __future__ import annotations

import base64
import http.client
import select
import socket
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.errors import CallbackRefused
from app.models.callback_policy import REFUSED, Network, refused_network
from app.services.deadline import Deadlines

MAX_ORIGINS = 64  # keep-alive connections a thread keeps, least recently used dropped
LOOK_AFTER_S = 1.0  # idle time after which a kept-alive connection is checked before use
# what a kept-alive connection closed under a request looks like, before any answer
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    read: float


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context callbacks are verified with: public CAs, a bundle's, or none."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    import certifi  # requests' own bundle: the same CAs as before this client

    return ssl.create_default_context(cafile=certifi.where())


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle keep-alive connection was closed by its server: an idle socket
    that is readable has nothing to say but EOF (or a reset)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _Guarded:
    """Connection behaviour shared by the plain and TLS classes: check the address
    reached, and register with the thread's deadline before sending."""

    refused: tuple[Network, ...] = ()
    deadlines: Deadlines | None = None
    read_timeout: float = 20.0

    def connect(self) -> None:
        sock = socket.create_connection(
            (self.host, self.port),  # type: ignore[attr-defined]
            self.timeout,  # type: ignore[attr-defined]
        )
        address = sock.getpeername()[0]
        network = refused_network(address, self.refused)
        if network is not None:
            sock.close()
            raise CallbackRefused(
                f"{self.host} connected to {address}, in the refused range {network}"  # type: ignore[attr-defined]
            )
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.read_timeout)
        self.sock = self._secure(sock)

    def _secure(self, sock: socket.socket) -> socket.socket:
        return sock

    def request(self, *args: object, **kwargs: object) -> None:
        if self.deadlines is not None:
            self.deadlines.attach(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


class GuardedHTTPConnection(_Guarded, http.client.HTTPConnection):
    pass


class GuardedHTTPSConnection(_Guarded, http.client.HTTPConnection):
    default_port = 443  # so the Host header leaves the port out, as for https
    context: ssl.SSLContext

    def _secure(self, sock: socket.socket) -> socket.socket:
        return self.context.wrap_socket(sock, server_hostname=self.host)


class CallbackClient:
    """One per delivery thread (connections are not shared between threads)."""

    def __init__(
        self,
        *,
        refused: tuple[Network, ...] = REFUSED,
        deadlines: Deadlines | None = None,
        verify: bool | str = True,
        timeouts: Timeouts = Timeouts(2.0, 20.0),
    ) -> None:
        self.refused = refused
        self.deadlines = deadlines
        self.timeouts = timeouts
        self._verify = verify
        self._context: ssl.SSLContext | None = None
        self._open: OrderedDict[tuple[str, str, int], http.client.HTTPConnection] = OrderedDict()

    def post(self, url: str, body: bytes, headers: dict[str, str], user: str) -> int:
        """POST with HTTP Basic `user:x`; the status code. Raises what http.client, ssl
        and socket raise (app/services/failure.py names it) or CallbackRefused."""
        parts = urlsplit(url)
        origin = (parts.scheme, parts.hostname or "", parts.port or 0)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        auth = base64.b64encode(f"{user}:x".encode()).decode()
        sent = {**headers, "Authorization": f"Basic {auth}", "Content-Length": str(len(body))}
        reused = origin in self._open
        try:
            return self._exchange(origin, target, body, sent)
        except STALE:
            if not reused:
                raise
        # The server closed the kept-alive connection just as it was reused (its idle
        # timer ran out between our check and the request): once more, on a new one.
        # It may have read the request first; a duplicate is what at-least-once allows,
        # where failing would back off from a healthy subscriber and send it again later.
        return self._exchange(origin, target, body, sent)

    def _exchange(
        self, origin: tuple[str, str, int], target: str, body: bytes, headers: dict[str, str]
    ) -> int:
        conn = self._connection(origin)
        try:
            conn.request("POST", target, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
        except BaseException:
            self._drop(origin)
            raise
        if response.will_close:
            self._drop(origin)
        else:
            conn.used_at = time.monotonic()  # type: ignore[attr-defined]
        return response.status

    def _connection(self, origin: tuple[str, str, int]) -> http.client.HTTPConnection:
        conn = self._open.pop(origin, None)
        idle = conn is not None and time.monotonic() - getattr(conn, "used_at", 0.0) >= LOOK_AFTER_S
        if idle and _dropped(conn):  # type: ignore[arg-type]
            conn.close()
            conn = None
        if conn is None:
            conn = self._new(origin)
        self._open[origin] = conn  # most recently used last
        while len(self._open) > MAX_ORIGINS:
            _, oldest = self._open.popitem(last=False)
            oldest.close()
        return conn

    def _new(self, origin: tuple[str, str, int]) -> http.client.HTTPConnection:
        scheme, host, port = origin
        if scheme == "https":
            if self._context is None:
                self._context = tls_context(self._verify)
            conn: http.client.HTTPConnection = GuardedHTTPSConnection(
                host, port or 443, timeout=self.timeouts.connect
            )
            conn.context = self._context  # type: ignore[attr-defined]
        else:
            conn = GuardedHTTPConnection(host, port or 80, timeout=self.timeouts.connect)
        conn.refused = self.refused  # type: ignore[attr-defined]
        conn.deadlines = self.deadlines  # type: ignore[attr-defined]
        conn.read_timeout = self.timeouts.read  # type: ignore[attr-defined]
        return conn

    def _drop(self, origin: tuple[str, str, int]) -> None:
        conn = self._open.pop(origin, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._open.values():
            conn.close()
        self._open.clear()


def callback_client(
    *,
    allow_link_local: bool,
    refused: tuple[Network, ...] = REFUSED,
    deadlines: Deadlines | None = None,
    verify: bool | str = True,
    timeouts: Timeouts = Timeouts(2.0, 20.0),
) -> CallbackClient:
    """`refused` is the policy's ranges (none when link-local callbacks are allowed);
    tests add one they can serve on. `deadlines` bounds each request as a whole."""
    return CallbackClient(
        refused=() if allow_link_local else refused,
        deadlines=deadlines,
        verify=verify,
        timeouts=timeouts,
    )

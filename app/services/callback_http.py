"""The HTTP session a delivery thread calls callbacks with.

Subscribe time can only judge a callback host written as an address; a name can resolve
anywhere, and resolve elsewhere tomorrow. So the connection itself checks the address
it reached, after the TCP connect and before a byte of the request is sent: a name
pointing at a metadata service (or rebinding to one between two lookups) is refused
whatever DNS said, and costs no extra lookup. The refusal raises CallbackRefused, which
the delivery records as a failed attempt, never a crash.

`trust_env` is off: requests would otherwise look up proxy variables and .netrc on
every call (measurable per request), and a bus must not send callbacks, with their
Basic credentials, through whatever proxy the environment happens to name.
"""

from __future__ import annotations

import socket
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from app.errors import CallbackRefused
from app.models.callback_policy import REFUSED, Network, refused_network
from app.services.deadline import Deadlines


def _guarded(
    base: type[HTTPConnection], refused: tuple[Network, ...], deadlines: Deadlines | None
) -> type[HTTPConnection]:
    """`base` whose every new socket is checked against `refused` before it is used, and
    whose every request is registered with `deadlines` before it is sent."""

    def _new_conn(self: HTTPConnection) -> socket.socket:
        sock = base._new_conn(self)
        address = sock.getpeername()[0]
        network = refused_network(address, refused)
        if network is not None:
            sock.close()
            raise CallbackRefused(
                f"{self.host} connected to {address}, in the refused range {network}"
            )
        return sock

    def request(self: HTTPConnection, *args: Any, **kwargs: Any) -> None:
        if deadlines is not None:
            deadlines.attach(self)
        base.request(self, *args, **kwargs)

    return type(f"Guarded{base.__name__}", (base,), {"_new_conn": _new_conn, "request": request})


class GuardedAdapter(HTTPAdapter):
    """An adapter whose every new connection is checked against the refused ranges and
    whose requests keep to the calling thread's deadline."""

    def __init__(
        self, refused: tuple[Network, ...] = REFUSED, deadlines: Deadlines | None = None
    ) -> None:
        self.refused = refused  # before super().__init__, which builds the pool manager
        self.deadlines = deadlines
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        pools = {"http": HTTPConnectionPool, "https": HTTPSConnectionPool}
        self.poolmanager.pool_classes_by_scheme = {
            scheme: type(
                f"Guarded{pool.__name__}",
                (pool,),
                {"ConnectionCls": _guarded(pool.ConnectionCls, self.refused, self.deadlines)},
            )
            for scheme, pool in pools.items()
        }


def callback_session(
    *,
    allow_link_local: bool,
    refused: tuple[Network, ...] = REFUSED,
    deadlines: Deadlines | None = None,
) -> requests.Session:
    """One per delivery thread: requests sessions are not safe to share between threads.
    `refused` is the policy's ranges (none when link-local callbacks are allowed); tests
    add one they can serve on. `deadlines` bounds each request as a whole."""
    session = requests.Session()
    session.trust_env = False
    adapter = GuardedAdapter(() if allow_link_local else refused, deadlines)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session

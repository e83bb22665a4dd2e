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
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from app.errors import CallbackRefused
from app.models.callback_policy import refused_network


def _checked(sock: socket.socket, host: str) -> socket.socket:
    address = sock.getpeername()[0]
    network = refused_network(address)
    if network is not None:
        sock.close()
        raise CallbackRefused(f"{host} connected to {address}, in the refused range {network}")
    return sock


class _GuardedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _checked(super()._new_conn(), self.host)


class _GuardedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _checked(super()._new_conn(), self.host)


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    """An adapter whose every new connection is checked against the callback policy."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool,
            "https": _GuardedHTTPSPool,
        }


def callback_session(*, allow_link_local: bool) -> requests.Session:
    """One per delivery thread: requests sessions are not safe to share between threads."""
    session = requests.Session()
    session.trust_env = False
    if not allow_link_local:
        adapter = GuardedAdapter()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session

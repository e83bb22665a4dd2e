"""A script run on a connection its thread keeps: the topic step of a publish, on one Redis.

redis-py wraps every command in machinery a hot path pays for each time, even when
called directly as app/lua's LuaScript does: the pool's checkout and return (a lock,
and metrics hooks that look up an observability provider on every call when none is
configured), the retry wrapper (retries are off, but the wrapper still runs), the
Python command packer. Timed alone on the CI machine (bench/publish_profile.py), the
topic step's round trip here costs the web process about 0.6 of its CPU through
LuaScript (31 against 51 µs). Here each web thread takes one connection from the
client's pool once, keeps it, and sends EVALSHA on it with redis-py's own Connection, so
errors, timeouts and replies are redis-py's as before:

- before each use the connection is checked as the pool checks it (unread data, or
  closed by Redis, e.g. after a restart: it is reconnected), so a publish after a
  Redis restart still succeeds instead of meeting a dead socket;
- NOSCRIPT (Redis restarted, its script cache empty) loads the script and runs it, as
  LuaScript does: the script never ran, so this is no replay;
- a connection error is raised to the caller (the web answers 503), never retried;
- when the thread ends, its connection goes back to the pool.

Only for a single Redis: on a cluster the topic step goes through redis-py's cluster
client, which finds the node that holds the catalog.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
from redis.connection import ConnectionPool

from app.errors import BusbarError
from app.lua import Scripts
from app.lua.call import Call, R
from app.lua.noscript import loaded


class _Kept:
    """One thread's connection; given back to the pool when the thread's locals go."""

    def __init__(self, pool: ConnectionPool, connection: Any) -> None:
        self.pool = pool
        self.connection = connection

    def __del__(self) -> None:
        self.pool.release(self.connection)


def _plain(connection: Any) -> socket.socket | None:
    """The OS socket under gevent's when the connection has one that is plain (not TLS)
    and non-blocking (gevent keeps it so); else None: not connected, TLS (whose bytes
    go through its own records), or a socket with a timeout (no gevent)."""
    sock = getattr(connection, "_sock", None)
    if sock is None or hasattr(sock, "cipher"):
        return None
    raw: socket.socket = getattr(sock, "_sock", sock)  # gevent's socket wraps the OS one
    return raw if raw.gettimeout() == 0.0 else None


def idle_and_open(connection: Any) -> bool:
    """What redis-py's can_read() tells (unread data, or closed by Redis); under the
    web's gevent in one non-blocking peek at the OS socket: can_read() polls, and a
    gevent poll goes through the hub, a tenth of a publish's CPU. TLS keeps can_read():
    its own records (a session ticket) may wait unread on the socket of a healthy
    connection; a socket with a timeout too, whose recv would first wait for data as
    long as the timeout: redis-py's own poll is the cheap way there."""
    if getattr(connection, "_sock", None) is None:
        return True  # not connected yet: sending connects it
    raw = _plain(connection)
    if raw is None:
        return not connection.can_read()
    try:
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # nothing to read: open and idle
    return False  # b"": closed by Redis; bytes: an answer nobody read


def send(connection: Any, packed: bytes) -> None:
    """redis-py's send, after one try on the OS socket: gevent's `sendall` (which
    redis-py calls) asks the socket for its send buffer size on every call, a
    getsockopt that was 6.5% of a publish's samples under wrk (docs/performance.md),
    and one send takes a topic step whole. What that send leaves, or an error it met
    (nothing sent then), goes through redis-py, which connects, waits, and raises its
    own errors as before; its health check (a PING when one is due) only when nothing
    was sent yet, never in the middle of a command. Before a send, _connection() has
    checked the connection as the pool would."""
    raw = _plain(connection)
    sent = 0
    if raw is not None:
        with contextlib.suppress(OSError):  # met again below, and raised as redis-py does
            sent = raw.send(packed)
    if sent < len(packed):
        connection.send_packed_command([packed[sent:]], check_health=sent == 0)


class HeldScript:
    """Runs a builder's call of its one script, as Scripts.run does, on a kept connection."""

    def __init__(self, client: redis.Redis, scripts: Scripts, name: str) -> None:
        self._client = client
        self.name = name
        self._script = scripts.loaded(name)
        self._local = threading.local()

    def _connection(self) -> Any:
        kept = getattr(self._local, "kept", None)
        if kept is None:
            pool = self._client.connection_pool
            kept = self._local.kept = _Kept(pool, pool.get_connection())
        connection = kept.connection
        try:  # what the pool checks before handing a connection out
            if not idle_and_open(connection):
                raise redis.ConnectionError("connection has unread data")
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            connection.disconnect()
        return connection

    def _run(self, connection: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """hiredis packs the command in C (redis-py's packer first walks the arguments
        in Python to convert bytearrays: ~10% of this call's CPU); str, bytes and
        numbers only, which is what scripts are given."""
        command = ("EVALSHA", self._script.sha, len(keys), *keys, *args)
        send(connection, hiredis.pack_command(command))
        return connection.read_response()

    def run(self, call: Call[R]) -> R:
        if call.script != self.name:
            raise BusbarError(f"this connection runs {self.name}, not {call.script}")
        connection = self._connection()
        reply = loaded(
            lambda: self._run(connection, call.keys, call.args),
            lambda: self._client.script_load(self._script.text),
        )
        return call.read(reply)

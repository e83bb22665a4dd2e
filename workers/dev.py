"""`busbar dev`: a real Redis-compatible server, web and worker on one machine.

For a newcomer with nothing installed but Python: the server comes from a pip wheel and
keeps its data with AOF under ./var/, a root key is made up (and kept in var/root-key so
tokens made yesterday still work today) unless BUSBAR_ROOT_KEY is set. Every child is
tied to this process (PR_SET_PDEATHSIG), and Ctrl-C or SIGTERM stops web and worker
first, then the server, so nothing is left running and no acknowledged event is lost.
"""

from __future__ import annotations

import logging
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import FrameType

from app.errors import BusbarError
from config.settings import Settings, environment_with, is_set
from workers import redis_server

log = logging.getLogger(__name__)


def root_key_for(settings: Settings, var: Path) -> str:
    if settings.root_key:
        return settings.root_key
    path = var / "root-key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_hex(16)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def wait_for_http(url: str, child: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise BusbarError(f"busbar web exited at start (status {child.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise BusbarError(f"busbar web did not answer {url} within {timeout:.0f} s")


class Supervisor:
    def __init__(self, settings: Settings, var: Path) -> None:
        self.settings = settings
        self.var = var
        self.stop = threading.Event()
        self.children: dict[str, subprocess.Popen] = {}
        self.server: redis_server.RedisServer | None = None

    def _spawn(self, role: str, env: dict[str, str]) -> None:
        self.children[role] = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", role],
            env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=redis_server.die_with_parent,
        )

    def _allow_http(self) -> str:
        """Local subscribers speak plain http, so dev allows it unless told otherwise."""
        return "1" if self.settings.allow_http or not is_set("BUSBAR_ALLOW_HTTP") else "0"

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self.var.mkdir(parents=True, exist_ok=True)
        try:
            return self._run()
        finally:
            self.shutdown()

    def _run(self) -> int:
        url = self.settings.redis_url
        if url is None:
            self.server = redis_server.start(self.var / "redis", persistent=True)
            url = self.server.url
        host = self.settings.host or "127.0.0.1"
        env = environment_with(
            {
                "BUSBAR_REDIS_URL": url,
                "BUSBAR_ROOT_KEY": root_key_for(self.settings, self.var),
                "BUSBAR_HOST": host,
                "PORT": str(self.settings.port),
                "BUSBAR_ALLOW_HTTP": self._allow_http(),
            }
        )
        self._spawn("web", env)
        self._spawn("worker", env)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        api = f"http://{shown}:{self.settings.port}"
        wait_for_http(f"{api}/health", self.children["web"])
        where = f" (data in {self.var / 'redis'})" if self.server else ""
        print(
            f"busbar dev is running\n  API       {api}\n  root key  {env['BUSBAR_ROOT_KEY']}\n"
            f"  Redis     {url}{where}\nPress Ctrl-C to stop.",
            flush=True,
        )
        while not self.stop.wait(0.2):
            for role, child in self.children.items():
                if child.poll() is not None:
                    log.error("busbar %s exited with status %s; stopping", role, child.returncode)
                    return 1
        return 0

    def shutdown(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + self.settings.timeout + 10
        for child in self.children.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self.server is not None:
            self.server.stop()
        print("busbar dev stopped", flush=True)

"""`busbar dev`: a real Redis-compatible server, web and worker on one machine.

For a newcomer with nothing installed but Python: the server comes from a pip wheel and
keeps its data with AOF under ./var/, a root key is made up (and kept in var/root-key so
tokens made yesterday still work today) unless BUSBAR_ROOT_KEY is set.

Stopping is the part that must never go wrong:
- Web and worker run in process groups of their own, so a Ctrl-C in the terminal (SIGINT
  to the foreground group) reaches only this process, which then sends each child one
  SIGTERM: gunicorn stops gracefully and the worker settles its deliveries in flight,
  then the server stops. Had the children been in the terminal's group too, each would
  get SIGINT from the terminal and SIGTERM from here a millisecond apart: gunicorn's
  workers then quit mid-request and were SIGKILLed 15 s later, and the worker
  deadlocked in its own signal handler (workers/process.py).
- The signal handler only records the signal. Setting a threading.Event there can
  deadlock: the handler runs in the main thread between two bytecodes, possibly while
  that same thread holds the Event's lock.
- Every child asks the kernel for SIGTERM when this process dies (PR_SET_PDEATHSIG), so
  `kill -9` of busbar dev leaves nothing behind either.
- var/dev.lock is held while running (config/devstate.py): a second `busbar dev` on the
  same data says so in one line instead of fighting over the port.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from app.errors import BusbarError
from config import devstate, origins, redact
from config.settings import DEV_CALLBACK_ALLOW, Settings, environment_with, is_set
from dev import cluster, redis_server

log = logging.getLogger(__name__)
POLL_S = 0.1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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


def check_port_free(host: str, port: int) -> None:
    """Fail at once, in one line, rather than let gunicorn retry a taken port for 8 s."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise BusbarError(
                f"cannot listen on {host}:{port} ({exc.strerror}): another program uses "
                "the port; stop it or choose another with PORT=..."
            ) from None


def wait_for_http(
    url: str, child: subprocess.Popen[bytes], stopping: Callable[[], bool], timeout: float = 30.0
) -> bool:
    """True once the URL answers 200; False if a stop was asked for meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stopping():
            return False
        if child.poll() is not None:
            raise BusbarError(f"busbar web exited at start (status {child.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(POLL_S)
    raise BusbarError(f"busbar web did not answer {url} within {timeout:.0f} s")


class Supervisor:
    def __init__(self, settings: Settings, var: Path) -> None:
        self.settings = settings
        self.var = var
        self.signalled: int | None = None
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.server: redis_server.RedisServer | None = None
        self.cluster: cluster.LocalCluster | None = None

    def _spawn(self, role: str, env: dict[str, str]) -> None:
        self.children[role] = subprocess.Popen(
            [sys.executable, "-m", "busbar", role],
            env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=redis_server.die_with_parent,
            process_group=0,  # out of the terminal's group: only we signal it (docstring)
        )

    def _callback_allow(self) -> str:
        """Local subscribers serve on this machine, so dev opens loopback (only) unless
        told otherwise: production refuses it (app/models/callback_policy.py)."""
        return os.environ.get("BUSBAR_CALLBACK_ALLOW", DEV_CALLBACK_ALLOW)

    def _allow_http(self) -> str:
        """Local subscribers speak plain http, so dev allows it unless told otherwise."""
        return "1" if self.settings.allow_http or not is_set("BUSBAR_ALLOW_HTTP") else "0"

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signalled = signum  # nothing else here: see the module docstring

    def _stopping(self) -> bool:
        return self.signalled is not None

    def run(self) -> int:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        lock = devstate.claim(self.var)
        if lock is None:
            running = devstate.running(self.var) or {}
            where = f" (pid {running.get('pid')}, {running.get('api')})" if running else ""
            raise BusbarError(
                f"already running with {self.var}/{where}: stop it first, or run another "
                "one from a different directory with another PORT"
            )
        with lock:
            try:
                return self._run()
            finally:
                self.shutdown()
                devstate.withdraw(self.var)

    def _run(self) -> int:
        host = self.settings.host or "127.0.0.1"
        check_port_free(host, self.settings.port)
        url, extra = self.settings.redis_url, {}
        if url is None and self.settings.dev_cluster:
            print(f"starting a local cluster of {self.settings.dev_cluster} masters", flush=True)
            # a fresh cluster each time: its nodes' ports change, so it keeps no data
            shutil.rmtree(self.var / "cluster", ignore_errors=True)
            self.cluster = cluster.start(
                self.var / "cluster", self.settings.dev_cluster, persistent=False
            )
            url = self.cluster.url
            # two shards per master by default spread the subscribers over every node
            masters = len(self.cluster.masters)
            shards = self.settings.shards if is_set("BUSBAR_SHARDS") else 2 * masters
            extra = {"BUSBAR_REDIS_CLUSTER": "1", "BUSBAR_SHARDS": str(shards)}
            # web and worker ignore it; `busbar config` shows it (a --cluster is not in ours)
            extra["BUSBAR_DEV_CLUSTER"] = str(self.settings.dev_cluster)
        elif url is None:
            self.server = redis_server.start(self.var / "redis", persistent=True)
            url = self.server.url
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        api = f"http://{shown}:{self.settings.port}"
        env = environment_with(
            {
                **extra,
                # operational events' urls lead to this bus, unless told otherwise
                "BUSBAR_PUBLIC_URL": os.environ.get("BUSBAR_PUBLIC_URL", api),
                "BUSBAR_REDIS_URL": url,
                "BUSBAR_ROOT_KEY": root_key_for(self.settings, self.var),
                "BUSBAR_HOST": host,
                "PORT": str(self.settings.port),
                "BUSBAR_ALLOW_HTTP": self._allow_http(),
                "BUSBAR_CALLBACK_ALLOW": self._callback_allow(),
            }
        )
        self._spawn("web", env)
        self._spawn("worker", env)
        if not wait_for_http(f"{api}/health", self.children["web"], self._stopping):
            return 0
        state = {"pid": os.getpid(), "api": api, "redis_url": url}
        if self.cluster:
            state |= {"redis_cluster": True, "shards": int(env["BUSBAR_SHARDS"])}
        # what web and worker run with, for `busbar config` beside us (secrets masked)
        kept = {"BUSBAR_ROOT_KEY": f"busbar dev, {self.var / 'root-key'}"}
        record = origins.record(env, os.environ, kept)
        if record is not None:
            state["settings"] = record
        devstate.publish(self.var, state)
        where = f" (data in {self.var / 'redis'})" if self.server else ""
        if self.cluster:
            nodes = "\n".join(f"            {line}" for line in self.cluster.describe())
            where = f" (a cluster of {env['BUSBAR_SHARDS']} shards, kept until Ctrl-C):\n{nodes}"
        print(
            f"busbar dev is running\n  API       {api}\n  root key  {env['BUSBAR_ROOT_KEY']}\n"
            f"  Redis     {redact.url(url)}{where}\nPress Ctrl-C to stop.",
            flush=True,
        )
        while not self._stopping():
            for role, child in self.children.items():
                if child.poll() is not None:
                    log.error("busbar %s exited with status %s; stopping", role, child.returncode)
                    return 1
            time.sleep(POLL_S)
        return 0

    def shutdown(self) -> None:
        """SIGTERM to web and worker at once, wait for both (the worker settles what it is
        delivering: at most a delivery timeout), then stop the server they use."""
        for child in self.children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + self.settings.timeout + self.settings.connect_timeout + 5
        for role, child in self.children.items():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("busbar %s did not stop in time: killing it", role)
                child.kill()
                child.wait()
        if self.server is not None:
            self.server.stop()
        if self.cluster is not None:
            self.cluster.stop()
        print("busbar dev stopped", flush=True)

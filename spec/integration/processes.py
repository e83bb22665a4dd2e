"""Start busbar's real processes for tests, and make sure none outlives its test."""

from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import requests

from dev.redis_server import free_port
from spec.integration.layouts import env_for


def package_version() -> str:
    """setup.cfg's version: the one every place that shows a version must show."""
    parser = configparser.ConfigParser()
    parser.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    return parser["metadata"]["version"]


def busbar_env(**overrides: str) -> dict[str, str]:
    """A clean environment for a busbar process; with BUSBAR_REDIS_URL, what it needs to
    use that Redis (the cluster settings when it is the test cluster's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUSBAR_")}
    env.pop("PORT", None)
    if "BUSBAR_REDIS_URL" in overrides:
        env.update(env_for(overrides["BUSBAR_REDIS_URL"]))
    env.update(overrides)
    return env


@contextmanager
def running(
    args: list[str],
    env: dict[str, str],
    cwd: Path | None = None,
    log: Path | None = None,
    prefix: Sequence[str] = (),
    command: Sequence[str] = (sys.executable, "-m", "busbar"),
) -> Iterator[subprocess.Popen]:
    """A busbar subcommand as a real child process; killed if the test leaves it running.
    `prefix` runs it through another command (`ip netns exec <ns>`, which execs it);
    `command` is the busbar to run (an installed one's console script, say)."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [*prefix, *command, *args],
        env=env,
        cwd=cwd,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if not isinstance(out, int):  # a log file, not DEVNULL
            out.close()


def wait_until(
    predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


def web_ready(log: Path, port: int) -> bool:
    """Whether the `busbar web` logging to `log` serves on `port`: its own log says it
    listens there (gunicorn's line), then /health answers. /health alone is not enough:
    free_port() gives the port up before web binds it, and in a make test run another
    test's server there answered /health, so a test drove someone else's bus."""
    if not log.exists() or f"Listening at: http://127.0.0.1:{port} " not in log.read_text():
        return False
    return answers(f"http://127.0.0.1:{port}/health")


def log_says(
    process: subprocess.Popen[bytes], log: Path, offset: int, ready: Callable[[str], bool],
    within_s: float, failed: tuple[str, ...] = (),
) -> bool:  # fmt: skip
    """Whether what `process` wrote to `log` past `offset` (this start's part) says it is
    ready within `within_s`; False once it exits or writes one of `failed`, or at the
    deadline (the caller stops it). A server's own line, not its port answering: a free
    port can be taken by another test's server between choosing and binding it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with open(log, "rb") as out:
            out.seek(offset)
            said = out.read().decode(errors="replace")
        if ready(said):
            return True
        if process.poll() is not None or any(x in said for x in failed):
            return False
        time.sleep(0.02)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; it only waits for its parent to read its status
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop(pid: int, within_s: float = 5.0) -> None:
    """SIGSTOP, returning once every thread of the process is stopped. The kernel stops
    a process with many threads only when one of them, picked to take the signal, next
    runs: on busy cores the others (a Go server's) can go on for a while and answer a
    request sent after the kill (make test once read a PubAck from a broker "stopped"
    this way)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except OSError:  # a thread that ended meanwhile
                continue
        if states and all(state in "Tt" for state in states):
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} not stopped {within_s} s after SIGSTOP")


def tcp_ports(pid: int) -> set[int]:
    """The local ports of a process's open TCP sockets (from /proc, as `ss -p` finds
    them): a subscriber that records its peers' ports can then tell which process sent
    a request, after that process is gone."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def children_of(pid: int) -> set[int]:
    """Every descendant of pid, from /proc (no psutil dependency)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


__all__ = [
    "answers",
    "busbar_env",
    "children_of",
    "free_port",
    "pid_alive",
    "running",
    "wait_until",
]

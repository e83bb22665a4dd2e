"""Shared by the delivery and job-queue benchmarks: machine line, medians, reports, CPU
accounting, a whole bus as real processes, a lean HTTP client, and a subscriber in its
own process, so its HTTP parsing never competes with the publishing threads' GIL.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.client
import json
import multiprocessing as mp
import os
import platform
import secrets
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import redis

from app.models.keys import Keys
from spec.integration.processes import answers, busbar_env, children_of, running, wait_until
from workers import redis_server

RESULTS = Path(__file__).resolve().parent / "results"
Record = tuple[float, str, list[Any]]  # (received at ms, path, data["s"] of each event)


def machine() -> str:
    """One line naming what the figures were measured on, so they can be compared later."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")), "?")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, {now}"


def spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """Median with min-max: one round alone can be thrown off by the other processes."""
    if not values:
        return "n/a"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}-{fmt.format(high)})"


def pct(values: list[float], q: int) -> float:
    """q-th percentile (nearest rank is enough for thousands of samples)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * q // 100)]


def median_table(field: str, rows: dict[str, list[dict]]) -> list[str]:
    """Markdown rows: for each case, the median over rounds of each entry of run[field]."""
    names = list(next(iter(rows.values()))[0][field])
    lines = ["| case | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for case, runs in rows.items():
        cells = [f"{statistics.median(r[field][n] for r in runs):.1f}" for n in names]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return lines


def write_report(name: str, text: str) -> Path:
    """Print and keep the report: bench/results/<name>.md is what the README points at."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    print(text)
    return path


def _stat(pid: int | str) -> tuple[str, float]:
    """(parent pid, user+system CPU seconds) of a process; ("", 0) when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return "", 0.0
    return fields[1], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """CPU of a process and, with `tree`, its descendants (gunicorn's workers are
    children of its master)."""
    return sum(_stat(one)[1] for one in {pid, *(children_of(pid) if tree else ())})


def others() -> dict[str, float]:
    """CPU so far of every user process outside this benchmark's tree: another job on the
    same 2 cores skews every figure, so the reports say how much of that there was."""
    ours = {str(os.getpid()), *map(str, children_of(os.getpid()))}
    found = {p.name: _stat(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}
    return {  # the kernel's own threads (parent 2, or 0 for kthreadd) are not counted
        pid: cpu
        for pid, (ppid, cpu) in found.items()
        if ppid not in ("", "0", "2") and pid not in ours
    }


def others_since(before: dict[str, float]) -> float:
    """CPU seconds other processes used since `before` (those that exited are missed)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in others().items())


class Api:
    """http.client on one keep-alive connection: requests costs several times more CPU
    per call, which on 2 cores would be taken from the processes under test."""

    def __init__(self, port: int, token: str) -> None:
        self.auth = "Basic " + base64.b64encode(f"{token}:".encode()).decode()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Authorization": self.auth, "Content-Type": "application/json"}
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def ok(self, method: str, path: str, body: object = None) -> bytes:
        status, payload = self.call(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {payload[:200]!r}")
        return payload

    def close(self) -> None:
        self.conn.close()


@dataclass
class Bus:
    port: int
    root: str
    redis_url: str
    pids: dict[str, int]

    def api(self, token: str | None = None) -> Api:
        return Api(self.port, token or self.root)

    def client(self, name: str) -> Api:
        """A new client token (named as given) and a connection using it."""
        with contextlib.closing(self.api()) as root:
            root.ok("POST", "/api_tokens", {"name": name, "token": name})
        return self.api(name)

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def dropped(self) -> dict[str, int]:
        """busbar's counters of events that left without delivery: none should have."""
        with redis.Redis.from_url(self.redis_url, decode_responses=True) as client:
            counters = client.hgetall(Keys().counters)
        words = ("drop", "expire", "dead")
        return {k: int(v) for k, v in counters.items() if int(v) and any(w in k for w in words)}


@contextmanager
def bus(work: Path, **env: str) -> Iterator[Bus]:
    """Redis, `busbar web` and one `busbar worker`, each a real process, all stopped on
    exit whatever happens (running() SIGKILLs the process group of what is left)."""
    server = redis_server.start(work / "redis", persistent=False)
    try:
        port, root = redis_server.free_port(), secrets.token_hex(16)
        base = busbar_env(
            BUSBAR_REDIS_URL=server.url, BUSBAR_ROOT_KEY=root, PORT=str(port),
            BUSBAR_HOST="127.0.0.1", BUSBAR_ALLOW_HTTP="1", BUSBAR_LOG_LEVEL="warning",
            BUSBAR_MONITOR_SINK="none", **env,
        )  # fmt: skip
        with ExitStack() as stack:
            web = stack.enter_context(running(["web"], base, log=work / "web.log"))
            wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), what="busbar web")
            worker = stack.enter_context(running(["worker"], base, log=work / "worker.log"))
            client = stack.enter_context(redis.Redis.from_url(server.url))
            key, marker = Keys().jobs_pending_index("main"), f".{worker.pid}.".encode()
            ready = lambda: any(marker in w for w in client.smembers(key))  # noqa: E731
            wait_until(ready, what="the worker's delivery threads")
            pids = {"redis": server.process.pid, "web": web.pid, "worker": worker.pid}
            yield Bus(port, root, server.url, pids)
            worker.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):  # running() kills it then
                worker.wait(30)
    finally:
        server.stop()


def _serve(control: Connection, counter: Any) -> None:
    """The subscriber process: answers 200 to every POST, keeps one record per request."""
    records: list[Record] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the worker's requests.Session expects

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            at = time.time() * 1000
            events = json.loads(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            stamps = [(e.get("data") or {}).get("s") for e in events]
            with lock:
                records.append((at, self.path, stamps))
            with counter.get_lock():
                counter.value += len(events)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control.send(server.server_address[1])
    while control.recv() == "take":
        with lock:
            taken, records[:] = list(records), []
        control.send(taken)


class Sink:
    """The local HTTP subscriber, in its own process; `received` counts events."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._counter = ctx.Value("q", 0)
        self._control, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, self._counter), daemon=True)
        self.process.start()
        self.port: int = self._control.recv()

    @property
    def received(self) -> int:
        return int(self._counter.value)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Until `count` events arrived in total or `timeout` seconds passed."""
        deadline = time.monotonic() + timeout
        while self.received < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def take(self) -> list[Record]:
        """Every request's record since the last take."""
        self._control.send("take")
        return self._control.recv()

    def stop(self) -> None:
        self._control.send("stop")
        self.process.join(5)
        self.process.kill()  # a no-op once it has exited

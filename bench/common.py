"""Shared by the benchmarks: a whole bus as real processes (with or without its worker),
a lean HTTP client, a subscriber in its own process, so its HTTP parsing never competes
with the publishing threads' GIL, and a paced publisher. The numbers side (machine line,
medians, reports, CPU accounting) lives in bench.measure and is re-exported here.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import multiprocessing as mp
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from app.models.keys import Keys
from app.services.counters import totals
from bench.measure import (
    RESULTS,
    busy_seconds,
    cpu_seconds,
    machine,
    median_table,
    others,
    others_since,
    pct,
    quick_flag,
    results_dir,
    spread,
    wait_quiet,
    write_headlines,
    write_report,
    write_samples,
)
from bench.sink import Record, Sink, SlowSink, by_lane
from config.settings import DEV_CALLBACK_ALLOW
from dev import cluster as local_cluster
from dev import redis_server
from spec.integration.processes import answers, busbar_env, running, wait_until

__all__ = [
    "RESULTS", "Api", "Bus", "Record", "Sink", "SlowSink", "bus", "busy_seconds", "by_lane",
    "cluster_env", "cpu_seconds", "machine", "median_table", "others", "others_since", "paced",
    "pct", "quick_flag", "results_dir", "spread", "topic_name", "wait_quiet", "web_bus",
    "worker", "write_headlines", "write_report", "write_samples",
]  # fmt: skip


def topic_name(tag: str) -> str:
    """Topic names are `^[a-z_]{1,64}$`: the run's tag with its digits spelled as letters."""
    return "t_" + tag.translate(str.maketrans("0123456789", "abcdefghij"))


class Api:
    """http.client on one keep-alive connection: requests costs several times more CPU
    per call, which on 2 cores would be taken from the processes under test."""

    def __init__(self, port: int, token: str) -> None:
        self.auth = "Basic " + base64.b64encode(f"{token}:".encode()).decode()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Authorization": self.auth, "Content-Type": "application/json"}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # the web closed the kept-alive connection while it was idle (its keep-alive
            # timeout) as this request went out, unanswered: send it on a new one
            self.conn.close()
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
    env: dict[str, str] = field(default_factory=dict)  # what worker() starts one with
    work: Path = Path()
    workers_started: int = 0

    def api(self, token: str | None = None) -> Api:
        return Api(self.port, token or self.root)

    def client(self, name: str) -> Api:
        """A new client token (named as given) and a connection using it."""
        with contextlib.closing(self.api()) as root:
            root.ok("POST", "/api_tokens", {"name": name, "token": name})
        return self.api(name)

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def unsubscribe(self, token: str) -> None:
        """DELETE /subscriber on a fresh connection: a client's own may have sat idle past
        gunicorn's keep-alive and been closed under it."""
        with contextlib.closing(self.api(token)) as api:
            api.call("DELETE", "/subscriber")

    def dropped(self) -> dict[str, int]:
        """busbar's counters of events that left without delivery: none should have."""
        with contextlib.closing(self.redis()) as client:
            counters = {k.decode(): int(v) for k, v in totals(client, self.keys).items()}
        words = ("drop", "expire", "dead")
        return {k: v for k, v in counters.items() if v and any(w in k for w in words)}

    @property
    def keys(self) -> Keys:
        return Keys("busbar:", int(self.env.get("BUSBAR_SHARDS", "4")))

    def redis(self) -> redis.Redis:
        """A client for the bus's Redis, a cluster's or one server's."""
        if self.env.get("BUSBAR_REDIS_CLUSTER") == "1":
            return RedisCluster.from_url(self.redis_url)  # type: ignore[return-value]
        return redis.Redis.from_url(self.redis_url)


def cluster_env(masters: int) -> dict[str, str]:
    """The settings busbar needs on a local cluster of `masters` masters: the cluster
    client, and 2 shards a master."""
    return {"BUSBAR_REDIS_CLUSTER": "1", "BUSBAR_SHARDS": str(2 * masters)}


@contextmanager
def redis_for(
    work: Path, cluster: int, given: tuple[str, int] | None = None
) -> Iterator[tuple[str, dict[str, int], dict[str, str]]]:
    """One server, or a local cluster of `cluster` masters (2 shards each): its URL, the
    pids whose CPU counts as Redis's, and the settings busbar needs for it. `given`: a
    server the caller started (its URL and pid), used as it is."""
    if given is not None:
        yield given[0], {"redis": given[1]}, {}
        return
    if not cluster:
        server = redis_server.start(work / "redis", persistent=False)
        try:
            yield server.url, {"redis": server.process.pid}, {}
        finally:
            server.stop()
        return
    nodes = local_cluster.start(work / "cluster", cluster, persistent=False)
    try:
        pids = {f"redis{i}": n.server.process.pid for i, n in enumerate(nodes.nodes)}
        yield nodes.url, pids, cluster_env(cluster)
    finally:
        nodes.stop()


@contextmanager
def web_bus(
    work: Path,
    cluster: int = 0,
    server: tuple[str, int] | None = None,
    env: Mapping[str, str] | None = None,
    code: Path | None = None,
) -> Iterator[Bus]:
    """Redis and `busbar web`, no worker: events queue and stay there, to measure ingest
    alone or to build a backlog that a worker started later (worker()) drains. `cluster`:
    a local Redis Cluster of that many masters instead of one server; `server`: a server
    the caller started (URL, pid); `env`: settings for web (and the worker); `code`: a
    checkout to run web from (a baseline)."""
    with redis_for(work, cluster, server) as (url, redis_pids, layout):
        port, root = redis_server.free_port(), secrets.token_hex(16)
        defaults = {"BUSBAR_LOG_LEVEL": "warning", "BUSBAR_MONITOR_SINK": "none"}
        base = busbar_env(
            BUSBAR_REDIS_URL=url, BUSBAR_ROOT_KEY=root, PORT=str(port),
            BUSBAR_HOST="127.0.0.1", BUSBAR_ALLOW_HTTP="1",
            BUSBAR_CALLBACK_ALLOW=DEV_CALLBACK_ALLOW,  # subscribers serve on this machine
            # the publish rate limit on, at a rate no benchmark reaches: its cost is in
            # every figure, its 429s in none
            BUSBAR_PUBLISH_RATE="100000000", BUSBAR_PUBLISH_BURST="1000000000",
            **(defaults | layout | dict(env or {})),
        )  # fmt: skip
        with running(["web"], base, cwd=code, log=work / "web.log") as web:
            wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), what="busbar web")
            yield Bus(port, root, url, {**redis_pids, "web": web.pid}, base, work)


@contextmanager
def worker(the_bus: Bus, code: Path | None = None) -> Iterator[subprocess.Popen]:
    """A `busbar worker` on the bus, yielded once its delivery threads wait for jobs, and
    stopped with SIGTERM (its graceful stop) on the way out (running() SIGKILLs it if
    that fails or the body raised). `code`: a checkout to run it from (a baseline)."""
    the_bus.workers_started += 1
    log = the_bus.work / f"worker-{the_bus.workers_started}.log"
    with ExitStack() as stack:
        process = stack.enter_context(running(["worker"], the_bus.env, cwd=code, log=log))
        client = stack.enter_context(contextlib.closing(the_bus.redis()))
        indexes = [shard.jobs_pending_index("main") for shard in the_bus.keys.all_shards()]
        marker = f".{process.pid}.".encode()
        ready = lambda: all(any(marker in w for w in client.smembers(i)) for i in indexes)  # noqa: E731
        wait_until(ready, what="the worker's delivery threads")
        the_bus.pids["worker"] = process.pid
        yield process
        the_bus.pids.pop("worker", None)
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):  # running() kills it then
            process.wait(30)


@contextmanager
def bus(work: Path, cluster: int = 0, **env: str) -> Iterator[Bus]:
    """Redis, `busbar web` and one `busbar worker`, each a real process, all stopped on
    exit whatever happens."""
    with web_bus(work, cluster, env=env) as the_bus, worker(the_bus):
        yield the_bus


def server_process(
    target: Callable[[Connection, Connection], None],
) -> tuple[BaseProcess, int, Connection]:
    """A subscriber in its own process (spawned, so nothing of this one is copied):
    `target(port_out, control)` serves, sends its port on port_out, then answers on
    control. Returns the process, its port, and this side of control."""
    ctx = mp.get_context("spawn")
    port_in, port_out = ctx.Pipe(duplex=False)
    control, remote = ctx.Pipe()
    process = ctx.Process(target=target, args=(port_out, remote), daemon=True)
    process.start()
    return process, int(port_in.recv()), control


def paced(
    rate: float,
    connect: Callable[[], Api],
    send: Callable[[Api, int], None],
    count: int | None = None,
    threads: int = 1,
    going: Callable[[], bool] = lambda: True,
) -> list[float]:
    """send(api, i) at start + i/rate for i < count (or while going()), spread over
    `threads` connections: a publish takes a few ms, so one thread alone would fall
    behind at a high rate. Returns how late each call started, s (the offered load is
    only what was asked if these stay small)."""
    schedule, late, start = iter(range(count or 2**62)), [], time.perf_counter() + 0.05

    def run() -> None:
        with contextlib.closing(connect()) as api:
            while going() and (i := next(schedule, None)) is not None:
                behind = time.perf_counter() - (start + i / rate)
                if behind < 0:
                    time.sleep(-behind)
                late.append(max(0.0, behind))
                send(api, i)

    pool = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return late

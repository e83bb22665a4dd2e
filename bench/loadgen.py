"""Two load generators behind one call: Python client threads and wrk.

Both hold keep-alive connections (publishers do), send the same request over and over
for a while, and return a Sample with the cores each role used meanwhile: gunicorn's
workers, Redis, the generator itself (`client`) and anything else on the machine
(`other`). The Python threads run in this process (its CPU is theirs); wrk is a child
process (bench/wrk.py). Why both: see bench/wrk.py.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench import measure, wrk

GENERATORS = ("python", "wrk")


@dataclass(frozen=True)
class Load:
    """What one measurement sends; `expect` is the only status it accepts."""

    name: str
    method: str
    path: str
    token: str | None
    bodies: Sequence[bytes | None]  # one per connection (wrk sends the first to all)
    per_request: int  # events per request: 1 for the floor and single publish
    expect: int


@dataclass(frozen=True)
class Sample:
    """One timed load: events per second, latency percentiles in ms, cores used per role,
    requests answered, and the latencies (every one for Python, quantiles for wrk)."""

    rate: float
    p50: float
    p99: float
    cpu: dict[str, float]
    latencies: list[float]
    request_rate: float  # requests per second (rate counts events)

    def micros(self, role: str) -> float:
        """CPU a role spent per request, µs: what each generator costs shows here."""
        return self.cpu[role] * 1e6 / self.request_rate


def usage(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far per role (gunicorn's workers, not its idle master), this
    process (the Python client threads), and the whole machine (`busy`)."""
    roles = {r: sum(measure.cpu_seconds(p, tree=False) for p in g) for r, g in pids.items()}
    return {"client": time.process_time(), "busy": measure.busy_seconds()} | roles


def headers(token: str | None) -> dict[str, str]:
    """Routemaster's Basic scheme: the token is the username, the password is empty."""
    auth = {"Authorization": "Basic " + base64.b64encode(f"{token}:".encode()).decode()}
    return {"Content-Type": "application/json"} | (auth if token else {})


def cores(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict[str, float]:
    """Cores used per role over the run; `other` is the machine's busy time nobody here
    accounts for (another job on the shared cores)."""
    cpu = {role: (after[role] - before[role]) / elapsed for role in after}
    cpu["other"] = max(0.0, cpu.pop("busy") - sum(cpu.values()))
    return cpu


def run_python(port: int, load: Load, seconds: float, pids: dict[str, list[int]]) -> Sample:
    """Each thread holds one keep-alive connection; any unexpected status fails the run."""
    latencies: list[list[float]] = [[] for _ in load.bodies]
    errors: list[str] = []
    start = threading.Barrier(len(load.bodies) + 1)
    sent = headers(load.token)

    def client(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine, body = latencies[index], load.bodies[index]
        try:
            conn.connect()
            start.wait()
            deadline = time.perf_counter() + seconds
            while (t0 := time.perf_counter()) < deadline:
                conn.request(load.method, load.path, body, sent)
                response = conn.getresponse()
                payload = response.read()
                mine.append((time.perf_counter() - t0) * 1000)
                if response.status != load.expect:
                    errors.append(f"{response.status} {payload[:200]!r}")
        except (OSError, http.client.HTTPException, threading.BrokenBarrierError) as exc:
            errors.append(repr(exc))
            start.abort()
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(load.bodies))]
    for thread in threads:
        thread.start()
    before = usage(pids)
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: see errors
        start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    after = usage(pids)
    if errors:
        raise RuntimeError(f"{load.name}: {len(errors)} failed requests, first: {errors[0]}")
    flat = sorted(x for chunk in latencies for x in chunk)
    n = len(flat)
    rate = n * load.per_request / elapsed
    cpu = cores(before, after, elapsed)
    return Sample(rate, flat[n // 2], flat[n * 99 // 100], cpu, flat, n / elapsed)


def run_wrk(port: int, load: Load, seconds: float, pids: dict[str, list[int]]) -> Sample:
    """wrk with as many connections as the load has bodies; any status outside 2xx/3xx or
    socket error fails the run (the caller checks that a publish really queued)."""
    before, began = usage(pids), time.perf_counter()
    done = wrk.run(
        f"http://127.0.0.1:{port}{load.path}", load.method, load.bodies[0],
        headers(load.token), seconds, len(load.bodies),
    )  # fmt: skip
    after, elapsed = usage(pids), time.perf_counter() - began
    if done.bad_status or done.socket_errors or not done.requests:
        raise RuntimeError(
            f"{load.name} (wrk): {done.requests} requests, {done.bad_status} with another "
            f"status than {load.expect}, {done.socket_errors} socket errors"
        )
    after["client"] = before["client"] + done.cpu_seconds  # wrk's CPU, not this process's
    cpu = cores(before, after, elapsed)  # wrk's start and stop included: a few ms
    request_rate = done.requests / done.seconds
    p50, p99 = done.quantile(50), done.quantile(99)
    return Sample(request_rate * load.per_request, p50, p99, cpu, done.quantiles, request_rate)


RUNNERS: dict[str, Callable[[int, Load, float, dict[str, list[int]]], Sample]] = {
    "python": run_python,
    "wrk": run_wrk,
}

"""wrk, the load generator written in C, driven from the benchmarks.

A Python client thread costs about as much CPU per request as the server's own floor
(`GET /health`), so on 2 shared cores it caps every load alike and a ratio between two
loads comes out flattered. wrk spends a tenth of that per request, which leaves the
cores to the server: its figures are the ones to compare with other servers.

Each run gets a small Lua script (method, body, headers) whose `done` hook prints the
counts and QUANTILES+1 latency percentiles, so nothing is parsed from wrk's human
report. `make bench` installs wrk (Debian package `wrk`) when it is missing.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from bench.measure import QUANTILES

MISSING = (
    "wrk is not installed: `make bench` installs it (Debian/Ubuntu: sudo apt-get install wrk; "
    "macOS: brew install wrk), or run bench.publish with --generators python"
)
THREADS = 2  # wrk's own threads: one per core here, as `wrk -t2 -c8` in issue 16

DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BUSBAR %d %d %d %d\\n", summary.requests, summary.duration,
    e.status, e.connect + e.read + e.write + e.timeout))
  for i = 0, POINTS - 1 do
    io.write(string.format("Q %d\\n", latency:percentile(100.0 * i / POINTS)))
  end
  io.write(string.format("Q %d\\n", latency.max))  -- percentile(100) answers 0
end
"""


@dataclass(frozen=True)
class Run:
    """What one wrk run measured: requests answered, over how long, how many with a
    status outside 2xx/3xx or a socket error, wrk's own CPU, latency quantiles (ms)."""

    requests: int
    seconds: float
    bad_status: int
    socket_errors: int
    cpu_seconds: float
    quantiles: list[float]

    def quantile(self, percent: int) -> float:
        """From the QUANTILES+1 points: `percent` 50 is the median, 99 the p99."""
        q = self.quantiles
        return q[(len(q) - 1) * percent // 100]


def available() -> bool:
    return shutil.which("wrk") is not None


def lua_string(value: str) -> str:
    """A Lua long-bracket string: no escaping needed for JSON bodies or header values.
    Level 1 at least: at level 0 a value ending in `]` (a JSON array) closes early."""
    level = 1
    while f"]{'=' * level}]" in value:
        level += 1
    return f"[{'=' * level}[{value}]{'=' * level}]"


def script(method: str, body: bytes | None, headers: dict[str, str]) -> str:
    lines = [f"wrk.method = {lua_string(method)}"]
    if body is not None:
        lines.append(f"wrk.body = {lua_string(body.decode())}")
    lines += [f"wrk.headers[ {lua_string(k)} ] = {lua_string(v)}" for k, v in headers.items()]
    return "\n".join(lines) + DONE.replace("POINTS", str(QUANTILES))


def parse(output: str, cpu: float) -> Run:
    """The `done` hook's lines; wrk's latency is in microseconds."""
    head = next(line for line in output.splitlines() if line.startswith("BUSBAR "))
    requests, micros, status, sockets = (int(x) for x in head.split()[1:])
    points = [int(line.split()[1]) / 1000 for line in output.splitlines() if line.startswith("Q ")]
    return Run(requests, micros / 1e6, status, sockets, cpu, points)


def run(
    url: str,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    seconds: float,
    connections: int,
) -> Run:
    """One wrk run of `seconds` with `connections` keep-alive connections. Its CPU comes
    from the kernel's account of waited-for children (the bench's other children, the
    bus's processes, are still running, so they are not in it)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="bench-wrk-") as lua:
        lua.write(script(method, body, headers))
        lua.flush()
        command = [
            "wrk", f"-t{min(THREADS, connections)}", f"-c{connections}",
            f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", lua.name, url,
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or "BUSBAR " not in done.stdout:
        tail = (done.stderr or done.stdout).strip()[-300:]
        took = time.perf_counter() - started
        raise RuntimeError(f"wrk failed (exit {done.returncode}, {took:.1f} s): {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return parse(done.stdout, cpu)

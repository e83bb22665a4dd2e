"""py-spy on a running busbar process, and what its samples say (for bench.profile).

py-spy attaches by pid (`py-spy record --pid`) once the benchmark's own helpers have
started the process and it is ready: run as py-spy's child instead, the worker's pid
would be py-spy's, and bench.common.worker waits for jobs named by the worker's own pid.
Attaching to a process that is not a descendant takes ptrace rights (root, or
`kernel.yama.ptrace_scope` at 0). It records the collapsed stacks (`--format raw`: one
line a distinct stack, frames joined by `;`, then its count), which are both the
figures this module prints and the flame graph bench.profile_flame draws, so the
picture and the figures come from the same samples.

What a sample is: the stack of the thread holding the GIL (`--gil`), the process
stopped while it is read (py-spy's default, so no stack is read half-changed). py-spy's
other ways of telling a busy thread from an idle one were wrong here, on 2 cores where
every process waits for one: by the thread's state, a thread waiting for a core counts
as busy (a quick run under bench.publish, nonblocking, gave 1,141 samples at 200 Hz
where the two web processes had used 528 samples' worth of CPU), and the stop for a
sample woke threads asleep in `Event.wait`, which then counted as running (two thirds
of the worker's samples under bench.keys were its idle heartbeat, scheduler and
tickers). Running Python holds the GIL, so those are gone; a sample is still wall
time, and a thread that holds the GIL while it waits for a core is counted then too.
Left out is what a thread does with the GIL released: system calls (gevent's socket
sends and receives, the event loop's poll and libuv's reads in the worker). `Window`
measures the processes' own CPU over the same time, user and system, so the report
says how the samples compare with it and how much went to the kernel.

A bias to know: on this machine (a VM) the stop lands mostly at the thread's next
system call, so a function that makes one is drawn wider than its CPU. With native
frames (`--native`), 15% of the worker's samples under bench.keys ended in getpid,
which CPython 3.11's asyncio.get_running_loop calls every time (0.18 µs a call timed
alone), while all of the worker's system time was 16% of its CPU. Parts of the work
(bench/profile_parts.py) span many system calls and move little; a function's own
share is a guide, not a measure. Without the stop (`--nonblocking`) a fifth of the
stacks were unreadable and a quarter came back cut short, which is worse.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.measure import busy_seconds
from spec.integration.processes import children_of, wait_until

Stacks = Counter[tuple[str, ...]]  # frames, outermost first: samples


def py_spy() -> str:
    """The py-spy beside this interpreter (the dev extra installs it), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("bench.profile needs py-spy: pip install py-spy (the dev extra has it)")
    return found


def times(pids: list[int]) -> tuple[float, float]:
    """User and system CPU seconds of these processes so far (0 for one that is gone)."""
    user = system = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, system = user + int(fields[11]), system + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


@dataclass
class Window:
    """What the sampled processes used while py-spy recorded, and at what rate."""

    rate: int
    pids: list[int]
    user: float = 0.0
    system: float = 0.0
    machine: float = 0.0  # CPU seconds the whole machine was busy
    seconds: float = 0.0

    def says(self, samples: int) -> str:
        cpu = max(self.user + self.system, 1e-9)
        held = samples / self.rate
        return (
            f"CPU while sampled: {self.user:.2f} s user + {self.system:.2f} s system "
            f"({100 * self.system / cpu:.0f}% in the kernel); {samples:,} samples at "
            f"{self.rate} Hz: the GIL held for {held:.2f} s, {100 * held / cpu:.0f}% of that CPU; "
            f"the machine {self.machine / self.seconds:.2f} cores busy over {self.seconds:.0f} s"
        )


@contextmanager
def recording(pid: int, out: Path, rate: int, children: bool = False) -> Iterator[Window]:
    """py-spy sampling `pid` (and its child processes when `children`: gunicorn's workers
    under its master) at `rate` a second while the body runs; SIGINT then makes it write
    `out` and stop, as Control-C does. Functions are aggregated by their first line
    (`--function`), so a function's samples are one frame, not one per line. The Window
    yielded is filled in on the way out."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    command = [py_spy(), "record", "--pid", str(pid), "--format", "raw", "--function", "--gil",
               "--rate", str(rate), "--output", str(out)]  # fmt: skip
    command += ["--subprocesses"] if children else []
    window = Window(rate, [pid, *(children_of(pid) if children else ())])
    log = out.with_suffix(".log")
    with log.open("wb") as sink:
        spy = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    wait_until(lambda: "Sampling" in log.read_text() or spy.poll() is not None, what="py-spy")
    before, busy, began = times(window.pids), busy_seconds(), time.monotonic()
    try:
        yield window
    finally:
        after = times(window.pids)
        window.user, window.system = after[0] - before[0], after[1] - before[1]
        window.machine, window.seconds = busy_seconds() - busy, time.monotonic() - began
        if spy.poll() is None:
            os.kill(spy.pid, signal.SIGINT)
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
    if not out.exists():
        raise RuntimeError(f"py-spy wrote no samples ({command}): {log.read_text()[-600:]}")


def errors(out: Path) -> str:
    """py-spy's own count of its samples and of the stacks it could not read, from its log."""
    found = re.search(r"Samples: (\d+) Errors: (\d+)", out.with_suffix(".log").read_text())
    return f"py-spy: {found[1]} samples, {found[2]} errors" if found else "py-spy: no count"


def read(path: Path) -> Stacks:
    """Collapsed stacks, without the `process ...` frames py-spy puts first when it
    follows child processes: the workers of one gunicorn count as one web."""
    stacks: Stacks = Counter()
    for line in path.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if frames:
            kept = tuple(f for f in frames.split(";") if not f.startswith("process "))
            stacks[kept] += int(count)
    return stacks


def where(frame: str) -> str:
    """The file of a frame `name (path:line)`, without the line."""
    return frame.rpartition(" (")[2].rstrip(")").rpartition(":")[0] or frame


def costs(stacks: Stacks) -> dict[str, Counter[str]]:
    """Samples by function where it was running (self), by function on the stack
    (inclusive: counted once a sample, recursion or not), and by file (self)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for frames, count in stacks.items():
        if not frames:
            continue
        own[frames[-1]] += count
        files[where(frames[-1])] += count
        for frame in set(frames):
            total[frame] += count
    return {"self": own, "inclusive": total, "self by file": files}


def top(stacks: Stacks, n: int = 12) -> str:
    """The largest costs as text: each table's first `n` rows, with their share."""
    every = sum(stacks.values())
    lines = [f"{every:,} samples"]
    for title, counted in costs(stacks).items():
        lines += ["", f"{title}:"]
        lines += [
            f"  {100 * c / every:5.1f}%  {c:7,}  {name}" for name, c in counted.most_common(n)
        ]
    return "\n".join(lines)

"""Destinations (issue 58): how fast one `busbar worker` puts events into a broker, NATS
JetStream and RabbitMQ, against the broker's Python client publishing the same messages
in a plain loop, and what a broker killed for 5 s under a keyed run costs.

Redis, `busbar web` and one `busbar worker`, each a real process with the product's
defaults but what the benchmark needs (plain `nats://` and `amqp://` and loopback
allowed: BUSBAR_ALLOW_HTTP and BUSBAR_CALLBACK_ALLOW, as bench.common's bus has them).
The brokers one after the other, never both running (an idle Erlang VM would count as
another job's CPU): the venv's nats-server with JetStream (bench.destinations_nats),
then a throwaway RabbitMQ node (bench.destinations_rabbit). Every measurement has a
fresh stream, or exchange and queue, and a fresh subscriber on a topic of its own.

Throughput (bench.destinations_rate): N events (5,000; --quick 1,000; an order, a
message of ~300 bytes) to a paused subscriber, then resumed, at `max: 1` and `max: 100`,
against the client's loop awaiting each confirm; rounds (5; --quick 1), the ratio
within a round, then the median (the issue's aim: 0.5x). Broker killed
(bench.destinations_kill): N events (10,000; --quick 2,000) over 16 keys at
`concurrency: 4`, `max: 100`, the broker killed once 30% are stored and restarted 5 s
later on its store; rounds: 2 (--quick 1). The report: bench.destinations_report.

    .venv/bin/python -m bench.destinations [--quick]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import common
from bench.destinations_bus import Retries, Target, rounded
from bench.destinations_kill import killed_run
from bench.destinations_nats import nats_broker
from bench.destinations_rabbit import rabbit_broker
from bench.destinations_rate import throughput
from bench.destinations_report import report

COMMAND = ".venv/bin/python -m bench.destinations"


class Sizes:
    def __init__(self, quick: bool) -> None:
        self.count, self.rounds, self.retries = (1000, 1, 0) if quick else (5000, 5, 8)
        self.kill_count, self.kill_rounds = (2000, 1) if quick else (10_000, 2)


def measured(
    the_bus: common.Bus, target: Target, sizes: Sizes, numbers: Iterator[int]
) -> dict[str, Any]:
    """One broker's throughput rounds, then its kill rounds."""
    retries = Retries(sizes.retries)
    runs, size = throughput(the_bus, target, sizes.count, sizes.rounds, numbers, retries)
    kills = []
    for r in range(sizes.kill_rounds):
        one = killed_run(the_bus, target, next(numbers), sizes.kill_count)
        kills.append(one)
        print(f"{target.name} killed, round {r + 1}: {rounded(one)}", flush=True)
    return {"name": target.name, "baseline": target.baseline, "runs": runs, "kills": kills,
            "count": sizes.count, "rounds": sizes.rounds, "size": size,
            "retried": retries.used, "kill_count": sizes.kill_count}  # fmt: skip


def measure(work: Path, quick: bool) -> dict[str, Any]:
    sizes, numbers = Sizes(quick), iter(range(1, 10_000))
    brokers = []
    with common.web_bus(work) as the_bus, common.worker(the_bus):
        the_bus.client("pub").close()
        with nats_broker(work) as nats:
            brokers.append(measured(the_bus, nats, sizes, numbers))
        with rabbit_broker(work) as rabbit:
            brokers.append(measured(the_bus, rabbit, sizes, numbers))
    return {"brokers": brokers}


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.destinations", __doc__, argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        found = measure(Path(work), quick)
    found["took"] = time.monotonic() - began
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("destinations", report(command, found))
    print(f"took {found['took']:.0f} s", flush=True)


if __name__ == "__main__":
    main()

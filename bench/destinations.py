"""Destinations (issue 58): how fast one `busbar worker` puts events into a broker, NATS
JetStream, RabbitMQ and Amazon SQS, against the broker's Python client publishing the
same messages in a plain loop, and what a broker killed for 5 s under a keyed run costs.

Redis, `busbar web` and one `busbar worker`, each a real process with the product's
defaults but what the benchmark needs (plain `nats://` and `amqp://` and loopback
allowed: BUSBAR_ALLOW_HTTP and BUSBAR_CALLBACK_ALLOW, as bench.common's bus has them).
The brokers one after the other, never both running (an idle Erlang VM would count as
another job's CPU): the venv's nats-server with JetStream (bench.destinations_nats),
then a throwaway RabbitMQ node (bench.destinations_rabbit), then moto's SQS server
behind a forwarder that is cut for the outage (bench.destinations_sqs, whose docstring
says why its FIFO queues are drained and its counts smaller: moto's cost, not SQS's).
Every measurement has a fresh stream, or exchange and queue, or FIFO queue, and a fresh
subscriber on a topic of its own.

Throughput (bench.destinations_rate): N events (5,000; --quick 1,000; an order, a
message of ~300 bytes) to a paused subscriber, then resumed, at `max: 1` and `max: 100`,
against the client's loop awaiting each confirm; rounds (5; --quick 1), the ratio
within a round, then the median (the issue's aim: 0.5x). Broker killed
(bench.destinations_kill): N events (10,000; --quick 2,000) over 16 keys at
`concurrency: 4`, `max: 100`, the broker killed once 30% are stored and restarted 5 s
later on its store; rounds: 2 (--quick 1). SQS: 1,000 events (--quick 200) over 3
rounds, and 2,000 keyed (--quick 1,000) once. The report: bench.destinations_report and, for SQS,
bench.destinations_sqs_report; `--only sqs` (or `--only brokers`) measures that part
alone and keeps the other part of bench/results/destinations.md as it was.

    .venv/bin/python -m bench.destinations [--quick] [--only sqs|brokers]
"""

from __future__ import annotations

import argparse
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
from bench.destinations_report import brokers_part, earlier_headlines, headlines
from bench.destinations_sqs import sqs_broker
from bench.destinations_sqs_report import sqs_part, together

COMMAND = ".venv/bin/python -m bench.destinations"


class Sizes:
    def __init__(self, quick: bool, sqs: bool = False) -> None:
        self.count, self.rounds, self.retries = (1000, 1, 0) if quick else (5000, 5, 8)
        self.kill_count, self.kill_rounds = (2000, 1) if quick else (10_000, 2)
        if sqs:  # moto's server takes tens of events/s (bench.destinations_sqs)
            self.count, self.rounds, self.retries = (200, 1, 0) if quick else (1000, 3, 4)
            self.kill_rounds = 1
            self.kill_count = 1000 if quick else 2000  # moto under concurrency 4: ~10/s


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
            "retried": retries.used, "kill_count": sizes.kill_count,
            "baselines": target.baselines}  # fmt: skip


def measure(work: Path, quick: bool, only: str | None) -> dict[str, Any]:
    """The brokers' part (NATS JetStream, then RabbitMQ) unless `only` is "sqs", then
    SQS's unless it is "brokers"; each part's seconds."""
    sizes, numbers = Sizes(quick), iter(range(1, 10_000))
    found: dict[str, Any] = {}
    with common.web_bus(work) as the_bus, common.worker(the_bus):
        the_bus.client("pub").close()
        if only != "sqs":
            began, brokers = time.monotonic(), []
            with nats_broker(work) as nats:
                brokers.append(measured(the_bus, nats, sizes, numbers))
            with rabbit_broker(work) as rabbit:
                brokers.append(measured(the_bus, rabbit, sizes, numbers))
            found["brokers"], found["took"] = brokers, time.monotonic() - began
        if only != "brokers":
            began = time.monotonic()
            with sqs_broker(work) as sqs:
                found["sqs"] = measured(the_bus, sqs, Sizes(quick, sqs=True), numbers)
            found["sqs took"] = time.monotonic() - began
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.destinations", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument("--only", choices=("sqs", "brokers"),
                        help="measure this part alone; keep the report's other part")  # fmt: skip
    args = parser.parse_args(argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        found = measure(Path(work), args.quick, args.only)
    command = COMMAND + (" --quick" if args.quick else "")
    ours = command + (f" --only {args.only}" if args.only else "")
    brokers = brokers_part(ours, found) if "brokers" in found else None
    sqs = sqs_part(ours, found["sqs"], found["sqs took"]) if "sqs" in found else None
    earlier = common.results_dir() / "destinations.md"
    common.write_report("destinations", together(brokers, sqs, earlier))
    measured_now = [*found.get("brokers", []), *([found["sqs"]] if "sqs" in found else [])]
    common.write_headlines("destinations", headlines(measured_now, earlier_headlines()))
    print(f"took {time.monotonic() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()

"""The Amazon SQS part of bench/results/destinations.md, and the report put together.

A part of its own because what it measures differs from the brokers' in ways the
reader must see next to the figures: moto's server stands in for SQS (its cost, not
SQS's, sets the pace), the queue is drained as it fills, the outage is a forwarder cut,
and the counts are smaller. Kept apart as a section so that `--only sqs` can measure
SQS alone and keep the NATS JetStream and RabbitMQ part of the report as it was (and a
run without SQS keeps SQS's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import common
from bench.destinations_bus import DISTURBED, MAX_1
from bench.destinations_kill import CHUNK, CONCURRENCY, KEYS, KILL_AT, OUTAGE_S, RATE
from bench.destinations_rate import ratios
from bench.destinations_report import (
    KILL_HEAD,
    THROUGHPUT_HEAD,
    kill_rows,
    stalled,
    throughput_rows,
)

TITLE = (
    "# Destinations: events/s into NATS JetStream, RabbitMQ and Amazon SQS, and a broker "
    "killed (issue 58)"
)
HEADING = "## Amazon SQS, against moto's server"
NOT_YET = "Not measured yet: `.venv/bin/python -m bench.destinations`."


def gathered_line(one: dict[str, Any]) -> str:
    """`max: 1` against the loop whose calls carry ten, as its gathered flights' do."""
    ratio = common.spread(ratios(one["runs"], MAX_1, one["baseline"]), "{:.2f}")
    return (
        f"`max: 1` against the {one['baseline']}: {ratio}x. Its flights gather up to 100 "
        "events, so its calls carry ten as that loop's do; moto takes a call of ten more "
        "slowly than ten calls of one (its cost per entry, the drain's included), where "
        "SQS bills a call of up to ten as one request (per 64 KiB) and limits a FIFO "
        "queue's throughput by calls."
    )


def sqs_part(command: str, one: dict[str, Any], took: float) -> list[str]:
    rows, lines = throughput_rows([one])
    kill_table, verdicts = kill_rows([one])
    return [
        HEADING,
        "",
        f"`{command}` from the repository root; {common.machine()}; took {took:.0f} s.",
        "",
        "The SQS API is moto's server (`python -m moto.server`, as spec/sqs_server.py "
        "runs it, signatures enforced, an IAM key of its own), reached by the worker and "
        "the baselines alike through a TCP forwarder on loopback (spec/tcp_forwarder.py). "
        "These are moto's figures, not SQS's: moto walks every message a queue holds, "
        "several times, for each message it is sent or hands out, so a call's cost grows "
        "with the queue (ten into a FIFO queue holding 500 took ~0.5 s, on an empty one "
        "~15 ms). So each measurement's FIFO queue is drained as it fills (ten received, "
        "then deleted, on a thread of this process, straight to moto): it stays near "
        "empty, for busbar and the baselines alike, and moto's CPU includes the drain's "
        "calls. For the same reason the counts are smaller than the brokers': a worker "
        "faces moto at tens of events/s, not thousands.",
        "",
        f"### Events/s into a FIFO queue: {one['count']:,} events, one worker",
        "",
        "As for the brokers: the events published beforehand to a paused subscriber, then "
        "resumed; `timeout: 0`, concurrency 1. The worker sends ten to a SendMessageBatch, "
        "each call awaited; at `max: 1` too, as a flight gathers the ready batches "
        "(docs/destinations.md, Flights of several batches). Two baselines, each with "
        "aiobotocore as the worker uses it (botocore's retries off), the same bodies, "
        "message groups and deduplication ids: for `max: 100`, the messages ten to a "
        "SendMessageBatch, each call awaited before the next; for `max: 1`, a "
        "SendMessage per message, each awaited. Each busbar case's ratio is against its "
        "own baseline, within a round. Broker CPU: moto's server's (the drain's calls "
        f"included). Median (min-max) over {one['rounds']} round(s), the four cases "
        f"taking turns. A measurement during which other jobs took more than {DISTURBED} "
        "of a core was taken again.",
        "",
        *THROUGHPUT_HEAD,
        *rows,
        "",
        *lines,
        gathered_line(one),
        "",
        f"### moto cut off for {OUTAGE_S:.0f} s under {one['kill_count']:,} keyed events",
        "",
        f"{one['kill_count']:,} events over {KEYS} keys published at {RATE:,.0f}/s in POSTs "
        f"of {CHUNK}; subscriber `concurrency: {CONCURRENCY}`, `max: 100`, `timeout: 0`, "
        "the product's retries, backoff and circuit; a FIFO queue, each key its message "
        f"group. Once {KILL_AT:.0%} of the events were stored the forwarder was cut "
        "(every connection through it reset, new ones refused: moto holds its queues in "
        f"memory, so it is not killed) and mended {OUTAGE_S:.0f} s later on its port. "
        "The drain reads moto directly and went on through the outage. Order per key: of "
        "each event's first arrival, in the order the queue handed them out (a group's "
        "in its order). Stored twice: copies beyond the first. SQS drops a resent "
        "MessageDeduplicationId for 5 minutes; moto only while its first copy is still "
        "in the queue, and the drain deletes it at once, so a batch sent again after a "
        "failure here stores the entries SQS had taken again: the repeats are what busbar "
        "sent twice (each with its event's id as the deduplication id: ids as message "
        "ids), not what SQS would keep.",
        "",
        *KILL_HEAD,
        *kill_table,
        "",
        *verdicts,
        *stalled(one["kills"]),
    ]


def parts(text: str) -> tuple[list[str], list[str]]:
    """An earlier report cut into the brokers' part (without the title) and SQS's."""
    lines = text.splitlines()[1:]
    while lines and not lines[0]:
        lines = lines[1:]
    at = next((i for i, line in enumerate(lines) if line == HEADING), len(lines))
    return lines[:at], lines[at:]


def together(brokers: list[str] | None, sqs: list[str] | None, earlier: Path) -> str:
    """The report: the parts measured now, and the earlier report's for the others."""
    old = parts(earlier.read_text()) if earlier.exists() else ([NOT_YET], [])
    first = brokers if brokers is not None else old[0]
    if first and first[-1]:
        first = [*first, ""]  # a blank line before SQS's heading
    return "\n".join([TITLE, "", *first, *(sqs if sqs is not None else old[1])])

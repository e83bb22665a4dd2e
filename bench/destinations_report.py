"""bench/results/destinations.md from what bench.destinations measured: for NATS
JetStream and RabbitMQ (SQS's part is bench.destinations_sqs_report's), events/s
against the client's plain loop, and a kill under a keyed run, with the verdicts on
busbar's promises spelled out (docs/destinations.md: every event at least once, each
key's first arrivals in order; none twice on JetStream, whose duplicate window drops a
resent prefix; repeats expected on RabbitMQ, which keeps no message ids).

Apart from the measuring modules so that the wording can change without touching what
is measured, and the other way round.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from bench import common
from bench.destinations_bus import DISTURBED, MAX_1, MAX_100, TIMEOUT_S
from bench.destinations_depth import POLL_S
from bench.destinations_kill import CHUNK, CONCURRENCY, HELD_MS, KEYS, KILL_AT, OUTAGE_S, RATE
from bench.destinations_rate import ratios

TIMED = {
    "NATS JetStream": "from the first to the last message stored, by JetStream's own "
    "timestamps; a fresh stream `S<n>` each time, the subject `s<n>.{type}.{key}`",
    "RabbitMQ": "from when the queue's depth was first read at 1 to when it was first "
    f"read at N (polled every {POLL_S * 1e3:.0f} ms: RabbitMQ 3.10 stamps no message); a "
    "fresh durable topic exchange and durable queue bound by `orders.#` each time, "
    "persistent messages, the routing key `orders.{type}.{key}`",
    "Amazon SQS": "from the first to the last message's SentTimestamp (ms); a fresh FIFO "
    "queue `q<n>.fifo` each time, drained as it fills, one message group (the events "
    "have no key)",
}
KILL_COLUMNS = (
    "down, s", "stored at the kill", "stored", "distinct ids", "missing", "stored twice",
    "events stored twice or more", "keys out of order", "ids as message ids",
    "failed attempts", "failed part way", "confirmed before failing",
    "longest failed attempt, s", "circuit opened after the kill, s", "dead letters",
    "first after the restart, s", "last after the restart, s", "kill to last, s",
)  # fmt: skip


def headlines(
    measured: list[dict[str, Any]], earlier: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """BENCHMARKS.md's summary rows: each broker's `max: 1` and `max: 100` against its
    client's loop; a broker this run did not measure (`--only`) keeps its earlier rows."""
    rows = {figure: value for figure, value in earlier}
    for one in measured:
        bases = against(one)
        for case in (MAX_1, MAX_100):
            ratio = common.spread(ratios(one["runs"], case, bases[case]), "{:.2f}")
            rows[f"{one['name']}, {case.removeprefix('busbar, ')}, against {bases[case]}"] = (
                ratio + "x"
            )
    return sorted(rows.items())


def earlier_headlines() -> list[tuple[str, str]]:
    path = common.results_dir() / "destinations.headlines.json"
    if not path.exists():
        return []
    return [(figure, value) for figure, value in json.loads(path.read_text())]


def against(one: dict[str, Any]) -> dict[str, str]:
    """Each busbar case's baseline (one for both but SQS's)."""
    return one.get("baselines") or {MAX_1: one["baseline"], MAX_100: one["baseline"]}


def throughput_rows(brokers: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The table's rows, and a verdict paragraph per broker."""
    rows, lines, spread = [], [], common.spread
    for one in brokers:
        runs, bases = one["runs"], against(one)
        for case, those in runs.items():
            base = bases.get(case, case)
            ratio = spread(ratios(runs, case, base), "{:.2f}") + "x" if case != base else "1"
            rows.append(
                f"| {one['name']} | {case} | {spread([r['events/s'] for r in those])} "
                f"| {ratio} | {spread([r['publisher CPU ms/event'] for r in those], '{:.3f}')} "
                f"| {spread([r['broker CPU µs/msg'] for r in those], '{:.0f}')} "
                f"| {sum(r['stored'] != one['count'] for r in those)} "
                f"| {max(r['other cores'] for r in those):.2f} |"
            )
        met = statistics.median(ratios(runs, MAX_100, bases[MAX_100])) >= 0.5
        lines += [
            f"{one['name']}: `max: 100` against {bases[MAX_100]} "
            f"{spread(ratios(runs, MAX_100, bases[MAX_100]), '{:.2f}')}x (the issue's aim: "
            f"0.5x; {'met' if met else 'NOT met'}); `max: 1` against {bases[MAX_1]} "
            f"{spread(ratios(runs, MAX_1, bases[MAX_1]), '{:.2f}')}x. Timed "
            f"{TIMED[one['name']]}; messages of {one['size']:.0f} bytes; {one['retried']} "
            "measurement(s) taken again.",
            "",
        ]
    return rows, lines


THROUGHPUT_HEAD = [
    "| broker | case | events/s | vs baseline | publisher CPU ms/event "
    "| broker CPU µs/msg | runs with a count off | other cores, most |",
    "|---|---|---|---|---|---|---|---|",
]


def throughput(found: dict[str, Any]) -> list[str]:
    rows, lines = throughput_rows(found["brokers"])
    first = found["brokers"][0]
    return [
        f"## Events/s into a broker: {first['count']:,} events, one worker",
        "",
        "The events published beforehand to a paused subscriber, then resumed; `timeout: "
        "0`, concurrency 1, the message the event as a callback receives it. Baseline: "
        "this process publishing the same messages (bodies, subjects or routing keys, "
        "ids, headers) with the broker's Python client in a loop awaiting each confirm, "
        "as the worker does: nats-py `js.publish` awaiting each PubAck; aio-pika on a "
        "confirming channel, `mandatory`, persistent, awaiting each confirm. Publisher "
        "CPU: the worker's, or the baseline's thread's; broker CPU: nats-server's, or "
        "the Erlang VM's. Runs with a count stored other than published: should be 0. "
        f"Median (min-max) over {first['rounds']} round(s), the cases taking turns; the "
        f"ratio within a round. A measurement during which other jobs took more than "
        f"{DISTURBED} of a core was taken again.",
        "",
        *THROUGHPUT_HEAD,
        *rows,
        "",
        *lines,
    ]


def kill_rows(brokers: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The table's rows, and the verdicts and long failed attempts per broker."""
    rows: list[str] = []
    lines: list[str] = []
    for one in brokers:
        for r, k in enumerate(one["kills"]):
            cells = " | ".join(cell(k[c]) for c in KILL_COLUMNS)
            rows.append(f"| {one['name']} | {r + 1} | {cells} | {describe(k['attempts'])} "
                        f"| {describe(k['failed by reason'])} |")  # fmt: skip
        lines += [verdict(one), ""]
        lines += [line for r, k in enumerate(one["kills"])
                  for line in held(one["name"], r + 1, k["held attempts"])]  # fmt: skip
    return rows, lines


KILL_HEAD = [
    "| broker | round | " + " | ".join(KILL_COLUMNS) + " | attempts by outcome "
    "| failed by reason |",
    "|---" * (len(KILL_COLUMNS) + 4) + "|",
]


def kills(found: dict[str, Any]) -> list[str]:
    first = found["brokers"][0]
    rows, lines = kill_rows(found["brokers"])
    return [
        f"## The broker killed for {OUTAGE_S:.0f} s under {first['kill_count']:,} keyed events",
        "",
        f"{first['kill_count']:,} events over {KEYS} keys published at {RATE:,.0f}/s in "
        f"POSTs of {CHUNK} (faster than the worker sends them: batches are in flight at "
        f"the kill); subscriber `concurrency: {CONCURRENCY}`, `max: 100`, `timeout: 0`, "
        "retries, backoff and circuit at the product's defaults. The broker killed "
        f"(SIGKILL) once {KILL_AT:.0%} of the events were stored, started again "
        f"{OUTAGE_S:.0f} s later on its port and store (down: from the kill to listening "
        "again; nats-server starts in milliseconds, a RabbitMQ node in about 6 s); read "
        "back once busbar had sent every event. Times after the restart: when the broker "
        "stored the event (JetStream's timestamps; RabbitMQ: when the queue's depth rose). "
        "From the attempt log: failed part way, the failed attempts whose batch the "
        "broker had partly confirmed; confirmed before failing, those messages in all "
        "(sent again with the same ids: JetStream must drop them as duplicates, RabbitMQ "
        "stores them again). Stored twice: copies beyond the first. Keys out of order: "
        "of each event's first arrival.",
        "",
        *KILL_HEAD,
        *rows,
        "",
        *lines,
        *stalled([k for one in found["brokers"] for k in one["kills"]]),
    ]


def verdict(one: dict[str, Any]) -> str:
    ks = one["kills"]
    whole = all(k["distinct ids"] == k["published"] and not k["missing"] for k in ks)
    ordered = all(k["keys out of order"] == 0 for k in ks)
    twice = [k["stored twice"] for k in ks]
    sent_again = ", ".join(str(k["confirmed before failing"]) for k in ks)
    if one["name"] == "NATS JetStream":
        repeats = f"none stored twice: {'yes' if not any(twice) else 'NO'}"
    elif one["name"] == "Amazon SQS":
        repeats = (f"stored twice: {', '.join(map(str, twice))} by round, against "
                   f"{sent_again} sent before a failure and sent again, each copy with "
                   "its event's id as MessageDeduplicationId (moto drops a resent id only "
                   "while its first copy is undeleted, and the drain deletes at once; SQS "
                   "keeps it 5 minutes)")  # fmt: skip
    else:
        repeats = (f"arrived twice (expected: no message ids): {', '.join(map(str, twice))} "
                   f"by round, against {sent_again} confirmed before a failure and sent "
                   "again")  # fmt: skip
    opened = [k["circuit opened after the kill, s"] for k in ks]
    after = ", ".join(cell(k["first after the restart, s"]) for k in ks)
    circuit = "; the circuit opened in " + (
        f"{sum(o is not None for o in opened)} of {len(ks)} round(s), "
        f"{', '.join(cell(o) for o in opened)} s after the kill (BUSBAR_CIRCUIT_FAILURES "
        "10 in a row spanning BUSBAR_CIRCUIT_OUTAGE_MS 5 s), and nothing was sent until "
        "its probe, BUSBAR_CIRCUIT_PROBE_MS 30 s x 1..1.5 after it opened: the first event "
        f"after the restart came {after} s after it"
        if any(o is not None for o in opened)
        else "none"
    )
    return (f"{one['name']}: every event stored: {'yes' if whole else 'NO'}; {repeats}; "
            f"order per key kept: {'yes' if ordered else 'NO'}{circuit}.")  # fmt: skip


def held(name: str, round_: int, attempts: list[tuple[str, float, float, str, str]]) -> list[str]:
    """A round's failed attempts that lasted HELD_MS or more, one by one."""
    if not attempts:
        return []
    listed = "; ".join(f"partition {p}: began {began:+.1f} s, failed {took:.1f} s later "
                       f"({why}: {body})" for p, began, took, why, body in attempts)  # fmt: skip
    return [f"{name}, round {round_}, failed attempts of {HELD_MS / 1e3:.0f} s or more, "
            f"times from the kill: {listed}.", ""]  # fmt: skip


def stalled(every: list[dict[str, Any]]) -> list[str]:
    """A line when an attempt in flight at the kill failed only on BUSBAR_TIMEOUT: the
    keys behind it then wait that long, however soon the broker is back."""
    longest = max(k["longest failed attempt, s"] for k in every)
    if longest < 0.9 * TIMEOUT_S:
        return []
    return [
        f"An attempt in flight when the broker was killed failed only after {longest:.1f} "
        f"s, on BUSBAR_TIMEOUT ({TIMEOUT_S:.0f} s by default), not when its connection "
        "dropped: the keys behind it waited that long, however soon the broker was back.",
        "",
    ]


def describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else f"{value:,}"


def brokers_part(command: str, found: dict[str, Any]) -> list[str]:
    """NATS JetStream's and RabbitMQ's part of the report (SQS's is
    bench.destinations_sqs_report's); `found["took"]`: the seconds they took."""
    return [
        f"`{command}` from the repository root; {common.machine()}; took {found['took']:.0f} s.",
        "",
        "Redis, `busbar web` and one `busbar worker` (the product's defaults, plain "
        "`nats://` and `amqp://` and loopback allowed); one broker at a time on loopback, "
        "the other not running: the venv's nats-server with JetStream (file store), then "
        "a RabbitMQ 3.10 node (Debian's rabbitmq-server, as spec/rabbitmq_server.py runs "
        "it, user `guest`); a fresh stream, or exchange and queue, and subscriber per "
        "measurement. Other cores: the machine's busy time beyond the processes "
        "measured, during a measurement.",
        "",
        *throughput(found),
        *kills(found),
    ]

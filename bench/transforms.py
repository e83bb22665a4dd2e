"""What a transform costs, and how fast a hostile one is stopped (app/models/transform.py).

Typical transforms (docs/transforms.md's examples) on a realistic order event: compile
time, and evaluation time under busbar's bounds against the package evaluating the same
expression with no bounds at all (the guards' cost), medians and p99 of `--runs`. Then
each hostile case of issue 57 (deep recursion, an endless tail call, a string doubled in
a loop, a catastrophic pattern on 10 KB, a 10 MB output, and the one-call amplifiers):
how long until the evaluation fails, and on which bound, median and max of `--tries`.

    .venv/bin/python -m bench.transforms
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from jsonata import Jsonata

from app.models.transform import Bounds, TransformFailed, parse_transform

EVENT = {
    "topic": "orders", "type": "create", "url": "https://shop.test/orders/1", "key": None,
    "t": 1_795_651_200_000,
    "data": {"id": 1, "total": 1234.5, "currency": "EUR", "email": "ann@example.test",
             "customer": {"name": "Ann", "email": "ann@example.test"},
             "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]},
}  # fmt: skip
TYPICAL = {
    "pick and rename 5 fields": '{"order": data.id, "amount": data.total, "currency": '
    'data.currency, "who": data.customer.name, "lines": $count(data.items)}',
    "a Slack message": '{"text": "Order " & data.id & " by " & data.customer.name & ": " & '
    '$formatNumber(data.total, "#,##0.00") & " " & data.currency}',
    "keep some, drop a field": 'type = "create" and data.total > 100 ? '
    'data ~> |$|{}, ["email"]| : null',
}
HOSTILE = {
    "recursion 100,000 deep": "($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))",
    "endless tail call": "($f := function($n){ $f($n + 1) }; $f(0))",
    "a string doubled 40 times": "($f := function($s, $n){ $n = 0 ? $s : $f($s & $s, $n - 1) }; "
    '$f("x", 40))',
    "(a+)+b on 10 KB": "$match(data.s, /(a+)+b/)",
    "a 10 MB output": '$pad("", 10000000, "x")',
    "1,000,000 numbers as a string": "$string([1..1000000])",
    "a million objects": '[1..1000000].{"i": $}',
    "$distinct of 50,000": "$distinct([1..50000])",
}


def timed(run: Callable[[], object], runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        took.append((time.perf_counter() - started) * 1e6)
    return took


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def compiler(source: str) -> Callable[[], object]:
    return lambda: parse_transform(source, "t", 4096)


def typical(runs: int, bounds: Bounds) -> None:
    print(f"{'transform':28}{'compile µs':>11}{'bounded µs':>12}{'p99':>8}"
          f"{'package µs':>12}{'p99':>8}{'ratio':>7}")  # fmt: skip
    for name, source in TYPICAL.items():
        compile_us = statistics.median(timed(compiler(source), 200))
        transform = parse_transform(source, "t", 4096)
        raw = Jsonata(source)
        ours = timed(lambda: transform.apply(EVENT, bounds), runs)  # noqa: B023 (used at once)
        theirs = timed(lambda: raw.evaluate(EVENT, {}), runs)  # noqa: B023
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{name:28}{compile_us:>11.0f}{a:>12.1f}{p99(ours):>8.1f}{b:>12.1f}"
              f"{p99(theirs):>8.1f}{a / b:>6.2f}x")  # fmt: skip


def hostile(tries: int, bounds: Bounds) -> None:
    print(f"\n{'hostile case':32}{'bound':>7}{'fails after, ms':>17}{'max':>8}")
    evil = {**EVENT, "data": {"s": "a" * 10_000 + "c"}}
    for name, source in HOSTILE.items():
        transform = parse_transform(source, "t", 4096)
        took, hit = [], "none"
        for _ in range(tries):
            started = time.perf_counter()
            try:
                transform.apply(evil, bounds)
                hit = "none"
            except TransformFailed as failed:
                hit = failed.bound
            took.append((time.perf_counter() - started) * 1e3)
        print(f"{name:32}{hit:>7}{statistics.median(took):>17.1f}{max(took):>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    bounds = Bounds()  # the defaults: 50 ms, depth 300, 256 KiB
    print(f"bounds: {bounds.time_ms} ms, depth {bounds.depth}, {bounds.output_bytes:,} bytes\n")
    typical(args.runs, bounds)
    hostile(args.tries, bounds)


if __name__ == "__main__":
    main()

"""What bench.transforms_delivery and bench.transforms_beside send: the order event, the
transforms of docs/transforms.md, the healthy pair and the hostile cases, and a paced
publisher whose events carry their send time."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from bench import common
from bench.common import Api, Bus

ORDER = {
    "id": 1042, "total": 1234.5, "currency": "EUR", "email": "ann@example.test",
    "customer": {"name": "Ann", "email": "ann@example.test"},
    "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": 1}],
}  # fmt: skip
PICK = (
    '{"order": data.id, "amount": data.total, "currency": data.currency, '
    '"who": data.customer.name, "lines": $count(data.items)}'
)
SLACK = (
    '{"text": "Order " & data.id & " by " & data.customer.name & ": " & '
    '$formatNumber(data.total, "#,##0.00") & " " & data.currency}'
)
HEALTHY_TOPIC = "h_load"
HEALTHY = {  # subscriber token: its transform (the stamp `s` kept, for the receiver)
    "h_plain": None,
    "h_shaped": PICK[:-1] + ', "s": data.s}',
}
HEALTHY_NAMES = {"h_plain": "healthy, no transform", "h_shaped": "healthy, pick and rename"}
ABSENT = "none (no hostile events)"
HOSTILE = {  # case: its subscriber's token and topic, its transform
    "an expression error (the floor)": ("x_error", '{"x": data.text + 1}'),
    "recursion with no base case": (
        "x_recursion",
        "($f := function($n) { $f($n + 1) + 1 }; $f(0))",
    ),
    "a string doubled 40 times": (
        "x_doubled",
        '($d := function($s, $n) { $n = 0 ? $s : $d($s & $s, $n - 1) }; {"x": $d("ab", 40)})',
    ),
    "an endless tail call": ("x_tail", "($f := function($n) { $n < 0 ? 0 : $f($n + 1) }; $f(0))"),
    "(a+)+b on 10 KB of a": ("x_pattern", '{"s": data.s, "m": $match(data.text, /(a+)+b/)}'),
    "a 10 MB output": ("x_pad", '{"x": $pad("", 10000000)}'),
}
# The same traffic as a hostile case's, with a transform that does its job: what a
# neighbour's events cost the healthy pair on these cores whatever their transform.
NEIGHBOUR = {
    "a quick transform (the neighbour)": ("x_quick", '{"s": data.s, "n": $length(data.text)}'),
}
TEXT = "a" * 10_000


def subscriptions(url: str) -> dict[str, dict[str, Any]]:
    """The healthy pair's and every hostile case's (and the neighbour's) subscriptions,
    by token, their callbacks paths of the receiver at `url`."""
    wanted = {}
    for token, transform in HEALTHY.items():
        route = {"topic": HEALTHY_TOPIC} | ({"transform": transform} if transform else {})
        wanted[token] = {"topics": [route], "callback": f"{url}/h/{token}", "max": 100,
                         "timeout": 0}  # fmt: skip
    for token, transform in [*HOSTILE.values(), *NEIGHBOUR.values()]:
        wanted[token] = neighbour_subscription(url, token, transform)
    return wanted


def subscribe(the_bus: Bus, wanted: dict[str, dict[str, Any]]) -> None:
    """A client named as each token, and its subscription."""
    for token, subscription in wanted.items():
        with contextlib.closing(the_bus.client(token)) as api:
            api.ok("POST", "/subscription", subscription)


def neighbour_subscription(url: str, token: str, transform: str) -> dict[str, Any]:
    """A hostile case's (or the neighbour's) subscription: one event a batch."""
    route = {"topic": token, "transform": transform}
    return {"topics": [route], "callback": f"{url}/x/{token}", "max": 1, "timeout": 0}


def stamped(data: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """An event whose data carries its send time (ms), as bench.sink records `s`."""
    return lambda: {"type": "create", "url": "https://shop.test/orders/1042",
                    "data": data | {"s": [0, time.time() * 1e3]}}  # fmt: skip


def publish(the_bus: Bus, topic: str, event: Callable[[], dict[str, Any]], rate: float,
            count: int, threads: int, late: list[float]) -> threading.Thread:  # fmt: skip
    """A paced publisher on a thread of its own; how late its sends started goes to `late`."""

    def send(api: Api, _: int) -> None:
        api.ok("POST", f"/topics/{topic}", event())

    def run() -> None:
        late.extend(common.paced(rate, lambda: the_bus.api("pub"), send, count, threads))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread

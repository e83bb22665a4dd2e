"""Content filters: which events of a route a subscriber takes, by what they hold.

A filter is a JSON object whose keys are event fields (`type`, `url`, `key`, `data`,
`data.<path>` with dots into nested objects) or the combinators `$and`, `$or` (lists
of filters) and `$not` (one filter); every key must hold. A field's value is a literal
(equality) or an operator object: `$eq`, `$neq`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`,
`$nin`, `$exist`, `$prefix`, `$suffix`, `$regex`, each of which must hold.

It is parsed once, when a subscription or a test names it, into closures: matching an
event walks no JSON and looks no operator up. Types are strict, as JSON's: `1` equals
`1.0` but not `true` or `"1"`; an order (`$gt`...) compares numbers with numbers and
strings with strings, and anything else (a missing field included) does not match. A
missing field matches `$neq`, `$nin` and `$exist: false` only. `$regex` is RE2 syntax
(google-re2: linear time in the text, whatever the pattern; no backreferences or
lookaround), searched anywhere in a string. A filter is bounded in bytes, depth and
conditions (Bounds, from BUSBAR_FILTER_MAX_*), so none is costly to hold or to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from app.errors import InvalidInput
from app.models.regexes import compiled, reason
from config.settings import Settings

FIELDS = ("type", "url", "key", "data")
COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
OPERATORS = ("$eq", "$neq", *COMPARE, "$in", "$nin", "$exist", "$prefix", "$suffix", "$regex")
MISSING: Any = object()  # a field the event does not have

Event = Mapping[str, Any]  # {"type", "url", "key"?, "data"?}, as published
Matcher = Callable[[Event], bool]
Test = Callable[[Any], bool]


@dataclass(frozen=True)
class Bounds:
    max_bytes: int = 4096  # BUSBAR_FILTER_MAX_BYTES: the filter as compact JSON
    max_depth: int = 8  # BUSBAR_FILTER_MAX_DEPTH: nested $and, $or, $not
    max_conditions: int = 64  # BUSBAR_FILTER_MAX_CONDITIONS: fields and operators


DEFAULT_BOUNDS = Bounds()


def filter_bounds(settings: Settings) -> Bounds:
    return Bounds(
        settings.filter_max_bytes, settings.filter_max_depth, settings.filter_max_conditions
    )


@dataclass(frozen=True, eq=False)  # equal only to itself: its closures compare no better
class Filter:
    source: dict[str, Any]  # as given: what listings show
    matches: Matcher


def view_of(event: Mapping[str, Any]) -> dict[str, Any]:
    """What a filter sees of an event: its type, url, key and data, a null key or data
    being absent (as a publish stores them)."""
    return {k: event[k] for k in FIELDS if event.get(k) is not None}


def identity(value: Any) -> tuple[str, Any]:
    """What JSON equality compares: numbers by value (bool is not a number), the rest
    by kind and value (objects and arrays by their canonical JSON)."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return ("j", json.dumps(value, sort_keys=True, separators=(",", ":")))


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_filter(raw: Any, where: str, bounds: Bounds) -> Filter:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be an object")
    size = len(json.dumps(raw, separators=(",", ":")).encode())
    if size > bounds.max_bytes:
        raise InvalidInput(
            f"{where} is {size:,} bytes as JSON; at most {bounds.max_bytes:,} "
            "(BUSBAR_FILTER_MAX_BYTES)"
        )
    return Filter(raw, _Parser(bounds).filter(raw, where, 0))


class _Parser:
    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.conditions = 0

    def counted(self, where: str) -> None:
        self.conditions += 1
        if self.conditions > self.bounds.max_conditions:
            raise InvalidInput(
                f"{where}: a filter holds at most {self.bounds.max_conditions} conditions "
                "(BUSBAR_FILTER_MAX_CONDITIONS)"
            )

    def filter(self, raw: Any, where: str, depth: int) -> Matcher:
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where} must be a filter (an object)")
        if depth > self.bounds.max_depth:
            raise InvalidInput(
                f"{where}: filters nest at most {self.bounds.max_depth} deep "
                "(BUSBAR_FILTER_MAX_DEPTH)"
            )
        return every(
            [self.entry(key, value, f"{where}.{key}", depth) for key, value in raw.items()]
        )

    def entry(self, key: str, value: Any, where: str, depth: int) -> Matcher:
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise InvalidInput(f"{where} must be a non-empty list of filters")
            parts = [self.filter(f, f"{where}[{i}]", depth + 1) for i, f in enumerate(value)]
            return every(parts) if key == "$and" else any_of(parts)
        if key == "$not":
            inner = self.filter(value, where, depth + 1)
            return lambda event: not inner(event)
        if key.startswith("$"):
            raise InvalidInput(
                f"{where}: no combinator {key}; a filter's keys are fields (type, url, key, "
                "data, data.<path>) or $and, $or, $not"
            )
        get = field(key, where)
        test = self.condition(value, where)
        return lambda event: test(get(event))

    def condition(self, value: Any, where: str) -> Test:
        if isinstance(value, dict) and any(k.startswith("$") for k in value):
            plain = [k for k in value if not k.startswith("$")]
            if plain:
                raise InvalidInput(f"{where} mixes operators with the field {plain[0]!r}")
            tests = [self.operator(op, arg, f"{where}.{op}") for op, arg in value.items()]
            return tests[0] if len(tests) == 1 else lambda v: all(t(v) for t in tests)
        self.counted(where)
        wanted = identity(value)
        return lambda v: v is not MISSING and identity(v) == wanted

    def operator(self, op: str, arg: Any, where: str) -> Test:
        self.counted(where)
        if op in ("$eq", "$neq"):
            wanted = identity(arg)
            if op == "$eq":
                return lambda v: v is not MISSING and identity(v) == wanted
            return lambda v: v is MISSING or identity(v) != wanted
        if op in COMPARE:
            return ordered(COMPARE[op], arg, where)
        if op in ("$in", "$nin"):
            if not isinstance(arg, list):
                raise InvalidInput(f"{where} must be a list of values")
            among = {identity(a) for a in arg}
            if op == "$in":
                return lambda v: v is not MISSING and identity(v) in among
            return lambda v: v is MISSING or identity(v) not in among
        if op == "$exist":
            if not isinstance(arg, bool):
                raise InvalidInput(f"{where} must be true or false")
            return lambda v: (v is not MISSING) is arg
        if op in ("$prefix", "$suffix", "$regex"):
            return textual(op, arg, where)
        raise InvalidInput(f"{where}: no operator {op}; the operators are {', '.join(OPERATORS)}")


def textual(op: str, arg: Any, where: str) -> Test:
    if not isinstance(arg, str):
        raise InvalidInput(f"{where} must be a string")
    if op == "$prefix":
        return lambda v: isinstance(v, str) and v.startswith(arg)
    if op == "$suffix":
        return lambda v: isinstance(v, str) and v.endswith(arg)
    search = regex(arg, where).search
    return lambda v: isinstance(v, str) and search(v) is not None


def ordered(compare: Callable[[Any, Any], bool], arg: Any, where: str) -> Test:
    if is_number(arg):
        return lambda v: is_number(v) and compare(v, arg)
    if isinstance(arg, str):
        return lambda v: isinstance(v, str) and compare(v, arg)
    raise InvalidInput(f"{where} must be a number or a string")


def regex(pattern: str, where: str) -> Any:
    try:
        return compiled(pattern)
    except re2.error as exc:
        raise InvalidInput(f"{where} is not a pattern RE2 takes: {reason(pattern, exc)}") from None


def field(key: str, where: str) -> Callable[[Event], Any]:
    if key in FIELDS:
        return lambda event: event.get(key, MISSING)
    head, _, rest = key.partition(".")
    path = rest.split(".")
    if head != "data" or not rest or "" in path:
        raise InvalidInput(
            f"{where}: no field {key!r}; a filter names type, url, key, data or data.<path> "
            "(dots between the names of nested objects)"
        )

    def get(event: Event) -> Any:
        value = event.get("data", MISSING)
        for name in path:
            if not isinstance(value, dict):
                return MISSING
            value = value.get(name, MISSING)
        return value

    return get


def every(parts: list[Matcher]) -> Matcher:
    if len(parts) == 1:
        return parts[0]
    return lambda event: all(p(event) for p in parts)


def any_of(parts: list[Matcher]) -> Matcher:
    if len(parts) == 1:
        return parts[0]
    return lambda event: any(p(event) for p in parts)

"""Content filters (app/models/filters.py): every operator, nested paths, missing fields,
type mismatches, combinations, the bounds, a pattern built for catastrophic
backtracking, and a property: the compiled filter agrees with a plain interpreter of the
same JSON on random events and filters."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.models.filters import Bounds, parse_filter
from spec.budget import MANY_EXAMPLES

ORDER = {
    "type": "create",
    "url": "https://o.test/orders/7",
    "key": "customer-3",
    "data": {"total": 120.5, "country": "FR", "lines": 3, "customer": {"tier": "gold"}},
}


def matches(raw: dict[str, Any], event: dict[str, Any] = ORDER) -> bool:
    return parse_filter(raw, "filter", Bounds()).matches(event)


def refused(raw: Any, bounds: Bounds | None = None) -> str:
    with pytest.raises(InvalidInput) as caught:
        parse_filter(raw, "filter", bounds or Bounds())
    return str(caught.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, True),
        ({"type": "create"}, True),
        ({"type": "update"}, False),
        ({"data.country": "FR", "data.lines": 3}, True),
        ({"data.total": {"$gt": 100}}, True),
        ({"data.total": {"$gt": 120.5}}, False),
        ({"data.total": {"$gte": 120.5}}, True),
        ({"data.total": {"$lt": 100}}, False),
        ({"data.lines": {"$lte": 3, "$gte": 3}}, True),
        ({"data.lines": {"$eq": 3.0}}, True),  # JSON numbers: 3 is 3.0
        ({"data.lines": {"$neq": 3}}, False),
        ({"data.country": {"$in": ["DE", "FR"]}}, True),
        ({"data.country": {"$nin": ["DE", "FR"]}}, False),
        ({"data.customer.tier": "gold"}, True),
        ({"data.customer": {"tier": "gold"}}, True),  # an object literal: equality
        ({"data.customer.tier.name": {"$exist": True}}, False),  # through a string
        ({"data.coupon": {"$exist": False}}, True),
        ({"key": {"$prefix": "customer-"}}, True),
        ({"url": {"$suffix": "/7"}}, True),
        ({"url": {"$regex": "^https://o\\.test/orders/[0-9]+$"}}, True),
        ({"url": {"$regex": "^http://"}}, False),
        ({"$or": [{"data.country": "DE"}, {"data.total": {"$gt": 100}}]}, True),
        ({"$and": [{"data.country": "FR"}, {"data.total": {"$gt": 200}}]}, False),
        ({"$not": {"data.country": "FR"}}, False),
        ({"$not": {"$or": [{"type": "delete"}, {"data.lines": {"$gt": 5}}]}}, True),
    ],
)
def test_each_operator_on_an_order(raw: dict[str, Any], expected: bool):
    assert matches(raw) is expected


def test_a_missing_field_matches_only_the_negative_operators():
    event = {"type": "create", "url": "https://o.test/1"}
    assert not matches({"data.total": {"$gt": 0}}, event)
    assert not matches({"key": "k"}, event)
    assert not matches({"data.country": {"$in": ["FR"]}}, event)
    assert matches({"data.country": {"$nin": ["FR"]}}, event)
    assert matches({"data.country": {"$neq": "FR"}}, event)
    assert matches({"key": {"$exist": False}}, event)


def test_types_are_strict_as_in_json():
    event = {"type": "create", "url": "u", "data": {"n": "150", "flag": True, "one": 1}}
    assert not matches({"data.n": {"$gt": 100}}, event)  # a string against a number
    assert matches({"data.n": {"$gt": "100"}}, event)  # strings compare as strings
    assert not matches({"data.flag": 1}, event) and not matches({"data.one": True}, event)
    assert not matches({"data.flag": {"$gt": 0}}, event)  # true is not a number
    assert matches({"data.flag": {"$in": [True]}}, event)
    assert not matches({"data.one": "1"}, event)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([], "filter must be an object"),
        ({"price": 3}, "filter.price: no field 'price'"),
        ({"data..x": 3}, "no field 'data..x'"),
        ({"data.x": {"$between": [1, 2]}}, "filter.data.x.$between: no operator $between"),
        ({"$xor": []}, "filter.$xor: no combinator $xor"),
        ({"$or": []}, "filter.$or must be a non-empty list of filters"),
        ({"$or": [3]}, "filter.$or[0] must be a filter"),
        ({"data.x": {"$gt": [1]}}, "filter.data.x.$gt must be a number or a string"),
        ({"data.x": {"$gt": True}}, "filter.data.x.$gt must be a number or a string"),
        ({"data.x": {"$in": "FR"}}, "filter.data.x.$in must be a list of values"),
        ({"data.x": {"$exist": 1}}, "filter.data.x.$exist must be true or false"),
        ({"data.x": {"$prefix": 1}}, "filter.data.x.$prefix must be a string"),
        (
            {"data.x": {"$regex": "(a)\\1"}},
            "filter.data.x.$regex is not a pattern RE2 takes: invalid escape sequence: \\1 (a "
            "backreference: busbar's patterns run in linear time, so no backreferences and no "
            "lookaround)",
        ),
        (
            {"url": {"$regex": "^(?!https://internal)"}},
            "filter.url.$regex is not a pattern RE2 takes: invalid perl operator: (?! (a "
            "lookaround",
        ),
        ({"url": {"$regex": "(a"}}, "filter.url.$regex is not a pattern RE2 takes: missing ): (a"),
        ({"data.x": {"$gt": 1, "y": 2}}, "filter.data.x mixes operators with the field 'y'"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_operator_or_path(raw: Any, named: str):
    assert named in refused(raw)


def test_a_filter_is_bounded_in_bytes_depth_and_conditions():
    assert "BUSBAR_FILTER_MAX_BYTES" in refused({"data.x": "y" * 5000})
    deep: dict[str, Any] = {"type": "create"}
    for _ in range(9):
        deep = {"$not": deep}
    assert "BUSBAR_FILTER_MAX_DEPTH" in refused(deep)
    many = {f"data.f{i}": {"$gt": i} for i in range(65)}
    assert "BUSBAR_FILTER_MAX_CONDITIONS" in refused(many)
    assert "BUSBAR_FILTER_MAX_CONDITIONS" in refused(many, Bounds(max_conditions=64))
    assert parse_filter(dict(list(many.items())[:64]), "f", Bounds()).matches(ORDER) is False


def test_a_pattern_built_for_catastrophic_backtracking_runs_in_linear_time():
    evil = parse_filter({"data.s": {"$regex": "^(a+)+$"}}, "filter", Bounds())
    event = {"type": "create", "url": "u", "data": {"s": "a" * 10_000 + "!"}}
    started = time.perf_counter()
    assert evil.matches(event) is False
    assert time.perf_counter() - started < 0.05


# --- the property: a plain interpreter of the JSON, written for clarity, not speed ---

NOTHING = object()


def lookup(event: dict[str, Any], name: str) -> Any:
    if name in ("type", "url", "key", "data"):
        return event.get(name, NOTHING)
    value: Any = event.get("data", NOTHING)
    for part in name.split(".")[1:]:
        value = value.get(part, NOTHING) if isinstance(value, dict) else NOTHING
    return value


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def holds(op: str, arg: Any, v: Any) -> bool:
    there = v is not NOTHING
    if op in ("$gt", "$gte", "$lt", "$lte"):
        kind_ok = (number(arg) and number(v)) or (isinstance(arg, str) and isinstance(v, str))
        if not there or not kind_ok:
            return False
        return {"$gt": v > arg, "$gte": v >= arg, "$lt": v < arg, "$lte": v <= arg}[op]
    return {
        "$eq": lambda: there and same(v, arg),
        "$neq": lambda: not (there and same(v, arg)),
        "$in": lambda: there and any(same(v, a) for a in arg),
        "$nin": lambda: not (there and any(same(v, a) for a in arg)),
        "$exist": lambda: there == arg,
        "$prefix": lambda: isinstance(v, str) and v.startswith(arg),
        "$suffix": lambda: isinstance(v, str) and v.endswith(arg),
    }[op]()


def interpret(f: dict[str, Any], event: dict[str, Any]) -> bool:
    for key, value in f.items():
        if key == "$and":
            ok = all(interpret(g, event) for g in value)
        elif key == "$or":
            ok = any(interpret(g, event) for g in value)
        elif key == "$not":
            ok = not interpret(value, event)
        elif isinstance(value, dict) and value and all(k.startswith("$") for k in value):
            ok = all(holds(op, arg, lookup(event, key)) for op, arg in value.items())
        else:
            v = lookup(event, key)
            ok = v is not NOTHING and same(v, value)
        if not ok:
            return False
    return True


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from(["", "a", "ab", "b", "1"]),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner, max_size=2)
    ),
    max_leaves=4,
)
# mostly fields that events hold, so that conditions meet values of every kind
names = st.sampled_from(["key", "data.x", "data.x", "data.y", "data.x.y", "type", "url", "data"])
operators = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$neq"]), values),
    st.tuples(
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
        st.integers(-3, 3) | st.sampled_from(["a", "b"]),
    ),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(values, max_size=3)),
    st.tuples(st.just("$exist"), st.booleans()),
    st.tuples(st.sampled_from(["$prefix", "$suffix"]), st.sampled_from(["", "a", "b"])),
)
literal = values.filter(lambda v: not (isinstance(v, dict) and any(k.startswith("$") for k in v)))
plain = st.one_of(scalars, scalars, scalars, literal)  # mostly what a field often holds
conditions = plain | st.lists(operators, min_size=1, max_size=2).map(dict)
filters = st.recursive(
    st.dictionaries(names, conditions, max_size=2),
    lambda inner: st.one_of(
        st.builds(lambda fs: {"$and": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda fs: {"$or": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda f: {"$not": f}, inner),
    ),
    max_leaves=6,
)
events = st.fixed_dictionaries(
    {"type": st.sampled_from(["create", "update"]), "url": st.sampled_from(["a", "ab", "b"])},
    optional={
        "key": scalars,
        "data": st.dictionaries(st.sampled_from("xy"), values, max_size=2) | values,
    },
)


@settings(max_examples=1500, deadline=None, derandomize=True)
@MANY_EXAMPLES
@given(f=filters, event=events)
def test_the_compiled_filter_agrees_with_a_plain_interpreter(
    f: dict[str, Any], event: dict[str, Any]
):
    compiled = parse_filter(f, "filter", Bounds(max_depth=64, max_conditions=1000))
    assert compiled.matches(event) is interpret(f, event)


single = st.builds(lambda name, pair: {name: {pair[0]: pair[1]}}, names, operators)
flat_events = st.fixed_dictionaries(
    {"type": st.just("create"), "url": st.just("u")},
    optional={
        "key": scalars,
        "data": st.fixed_dictionaries({}, optional={"x": scalars, "y": values}),
    },
)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(f=single, event=flat_events)
def test_each_operator_agrees_with_the_interpreter_on_every_kind_of_value(
    f: dict[str, Any], event: dict[str, Any]
):
    """One operator on one field at a time: every operator meets every kind of value
    (a bool where a number is asked, a number where a string is) often."""
    compiled = parse_filter(f, "filter", Bounds())
    assert compiled.matches(event) is interpret(f, event)

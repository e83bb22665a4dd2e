"""Transforms (app/models/transform.py): compiled once with a 400 naming where an
expression is wrong, evaluated under per-call bounds on time, depth and size (each
hostile case fails fast, naming its bound), on RE2, without $eval; $replace of a string
kept the package's meaning in linear time; one compiled transform shared by threads."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonata import Jsonata

from app.errors import InvalidInput
from app.models.transform import Bounds, TransformFailed, event_data, parse_transform

EVENT = {"topic": "orders", "type": "create", "url": "https://shop.test/o/1", "key": None,
         "t": 1, "data": {"id": 1, "name": "Ann", "items": [1, 2, 3]}}  # fmt: skip
BOUNDS = Bounds(time_ms=50, depth=300, output_bytes=64 * 1024)


def run(source: str, event: dict | None = None, bounds: Bounds = BOUNDS) -> object:
    return parse_transform(source, "transform", 4096).apply(event or EVENT, bounds)


def failed(source: str, event: dict | None = None) -> tuple[str, str, float]:
    """The bound hit, its message, and the CPU the evaluation took (CPU, not the clock:
    under make test's load a depth failure took 0.74 s of wall time, waiting for a core)."""
    started = time.process_time()
    with pytest.raises(TransformFailed) as caught:
        run(source, event)
    return caught.value.bound, caught.value.message, time.process_time() - started


def test_outputs_and_drops() -> None:
    assert run('{"who": data.name, "n": $count(data.items)}') == {"who": "Ann", "n": 3}
    assert run('"Order " & data.id') == "Order 1"
    assert run("data.nothing") is None and run("null") is None  # both drop the event
    assert run('key = null ? "no key" : key') == "no key"
    assert event_data(run('{"text": "Order " & data.id}')) == {"text": "Order 1"}
    assert event_data(None) is None


@pytest.mark.parametrize(("source", "said"), [
    ('"Order " & data.id', 'not "Order 1"'), ("data.items", "not a list"),
    ("3", "not 3"), ("true", "not true"),
])  # fmt: skip
def test_an_output_that_is_not_an_object_fails(source: str, said: str) -> None:
    """`data` is an object, as a publish takes it: receivers read it so."""
    with pytest.raises(TransformFailed, match=f"the output must be an object, {said}") as failed:
        event_data(run(source))
    assert failed.value.bound == "error"


@pytest.mark.parametrize(("source", "where"), [
    ('{"a": data.x', 12), ('"abc', 4), ("a ~> ", 5),
])  # fmt: skip
def test_a_syntax_error_names_its_place(source: str, where: int) -> None:
    with pytest.raises(
        InvalidInput, match=rf"transform is not valid JSONata: .*\(at character {where}\)"
    ):
        parse_transform(source, "transform", 4096)


@pytest.mark.parametrize(("source", "said"), [
    ("", "must be a JSONata expression"), (5, "must be a JSONata expression"),
    ("x" * 65, "is over 64 bytes (BUSBAR_TRANSFORM_MAX_BYTES)"),
    ('$match("a", /(a)\\1/)', "a pattern busbar cannot run"),
    ('$match("a", /(?=a)/)', "a pattern busbar cannot run"),
])  # fmt: skip
def test_refused_at_compile(source: object, said: str) -> None:
    with pytest.raises(InvalidInput, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_transform(source, "transform", 64)


@pytest.mark.parametrize(("source", "bound"), [
    ("($f := function($n){ $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))", "depth"),
    ("($f := function($n){ $f($n + 1) }; $f(0))", "time"),  # a tail call: no depth
    ('($f := function($s, $n){ $n = 0 ? $s : $f($s & $s, $n - 1) }; $f("x", 40))', "size"),
    ('$pad("", 1000000000, "x")', "size"),
    ("$string([1..1000000])", "size"),
    ('$join([1..100000].$string(), "-----")', "size"),
    ("$distinct([1..50000])", "size"),
    ('$replace($pad("", 60000, "a"), "a", "bbbbbbbbbb")', "size"),
    ('$eval("1 + 1")', "error"), ('($e := $eval; $e("1 + 1"))', "error"),
    ('data.name + 1', "error"),
])  # fmt: skip
def test_a_hostile_transform_fails_fast_naming_its_bound(source: str, bound: str) -> None:
    hit, message, took = failed(source)
    assert hit == bound, message
    assert took < BOUNDS.time_ms / 1000 + 0.25, f"{took:.3f} s for {source}"


def test_patterns_run_on_re2_in_linear_time() -> None:
    evil = {**EVENT, "data": {"s": "a" * 10_000 + "c"}}
    started = time.perf_counter()
    assert run("$match(data.s, /(a+)+b/)", evil) is None
    assert time.perf_counter() - started < 0.1
    assert run('$match("Hello", /h/i).match') == "H"
    assert run('$replace("a1b22", /[0-9]+/, "#")') == "a#b#"


def test_now_is_the_evaluations_own() -> None:
    transform = parse_transform("$millis()", "transform", 4096)
    first = transform.apply(EVENT, BOUNDS)
    time.sleep(0.02)
    assert transform.apply(EVENT, BOUNDS) >= first + 20  # type: ignore[operator]
    assert abs(run("$toMillis($now())") - time.time() * 1000) < 1000  # type: ignore[operator]


def test_threads_sharing_a_transform_each_get_their_own_event() -> None:
    transform = parse_transform('{"id": data.id, "sum": $sum(data.items)}', "t", 4096)
    wrong: list[object] = []

    def many(n: int) -> None:
        for i in range(200):
            event = {**EVENT, "data": {"id": n * 1000 + i, "items": [n, i]}}
            got = transform.apply(event, BOUNDS)
            if got != {"id": n * 1000 + i, "sum": n + i}:
                wrong.append(got)

    threads = [threading.Thread(target=many, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


texts = st.text(alphabet="ab$0 1", max_size=12)


@given(text=texts, pattern=st.text(alphabet="ab$", min_size=1, max_size=3), by=texts,
       most=st.one_of(st.none(), st.integers(0, 4)))  # fmt: skip
def test_replace_of_a_string_means_what_the_package_means(text: str, pattern: str, by: str,
                                                          most: int | None) -> None:  # fmt: skip
    bindings = {"text": text, "pattern": pattern, "by": by, "most": most}
    source = "$replace($text, $pattern, $by)" if most is None else \
        "$replace($text, $pattern, $by, $most)"  # fmt: skip
    expected = Jsonata(source).evaluate(None, dict(bindings))
    transform = parse_transform(source, "t", 4096)
    got = transform.expression.evaluate(None, dict(bindings))
    assert got == expected


def test_every_example_in_the_docs_runs() -> None:
    """docs/transforms.md's ```jsonata blocks, as a user would paste them."""
    text = (Path(__file__).parents[3] / "docs" / "transforms.md").read_text()
    examples = re.findall(r"```jsonata\n(.*?)```", text, re.S)
    order = {**EVENT, "data": {"id": 7, "total": 1234.5, "currency": "EUR", "email": "a@x",
                               "customer": {"name": "Ann"}, "items": [{"sku": "a"}]}}  # fmt: skip
    outputs = [run(example, order) for example in examples]
    assert len(examples) == 4 and all(o is not None for o in outputs)
    assert outputs[1] == {"text": "Order 7 by Ann: 1,234.50 EUR"}
    assert "email" not in outputs[3]  # type: ignore[operator]


def test_each_transform_keeps_the_output_limit_it_was_compiled_with() -> None:
    """No state shared between transforms: a small limit does not leak into another's."""
    small = parse_transform('$pad("", 1000, "x")', "t", 4096, output_bytes=100)
    large = parse_transform('$pad("", 1000, "x")', "t", 4096, output_bytes=10_000)
    roomy = Bounds(output_bytes=10_000)
    assert len(large.apply(EVENT, roomy)) == 1000  # type: ignore[arg-type]
    with pytest.raises(TransformFailed, match=r"\$pad would make a value over 100 long"):
        small.apply(EVENT, roomy)
    assert len(large.apply(EVENT, roomy)) == 1000  # type: ignore[arg-type]

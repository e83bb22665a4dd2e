"""W3C Trace Context parsing: what is kept, what is ignored (never refused)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.models import trace_context
from app.models.trace_context import TraceContext, parse, parse_traceparent, parse_tracestate

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"


def test_a_valid_traceparent_is_kept_as_it_came() -> None:
    assert parse_traceparent(VALID) == VALID
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-00") == f"00-{TRACE}-{PARENT}-00"
    assert parse_traceparent(f" {VALID}\t") == VALID  # optional whitespace around a field
    context = parse(VALID)
    assert context == TraceContext(VALID, None)
    assert (context.trace_id, context.parent_id, context.flags) == (TRACE, PARENT, 1)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        VALID.upper(),  # hex is lower case
        f"ff-{TRACE}-{PARENT}-01",  # version ff is invalid
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has exactly four fields
        f"00-{TRACE[:-1]}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-1",
        f"00-{TRACE}-{PARENT}-0g",
        f"0x-{TRACE}-{PARENT}-01",
        f"00_{TRACE}_{PARENT}_01",
        f"00-{TRACE}-{PARENT}x01",
    ],
)
def test_an_invalid_traceparent_is_ignored(value: str | None) -> None:
    assert parse_traceparent(value) is None
    assert parse(value, "rojo=1") is None  # and its tracestate with it


def test_a_later_version_is_read_as_version_00() -> None:
    assert parse_traceparent(f"01-{TRACE}-{PARENT}-03-what-comes-next") == VALID
    assert parse_traceparent(f"cc-{TRACE}-{PARENT}-00") == f"00-{TRACE}-{PARENT}-00"
    assert parse_traceparent(f"01-{TRACE}-{PARENT}-01x") is None  # no `-` after the flags


def test_tracestate_is_kept_normalized_beside_a_valid_traceparent() -> None:
    assert parse(VALID, "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE") == TraceContext(
        VALID, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    )
    assert parse_tracestate("a=1,,b=2 ,") == "a=1,b=2"  # empty members are allowed, and left out
    assert parse_tracestate("tenant@vendor=x") == "tenant@vendor=x"
    assert parse(VALID, None) == TraceContext(VALID)


@pytest.mark.parametrize(
    "value",
    [
        "",
        " , ",
        "Rojo=1",  # keys are lower case
        "rojo",  # no value
        "rojo=1,rojo=2",  # a key at most once
        "rojo=a,b",  # `b` is no member
        "rojo=va=lue",
        "k=" + "v" * 257,
        ",".join(f"k{i}=v" for i in range(trace_context.MAX_TRACESTATE_MEMBERS + 1)),
        "k=" + "v" * 255 + "," + ",".join(f"q{i}=" + "v" * 20 for i in range(12)),  # > 512
    ],
)
def test_a_malformed_or_oversized_tracestate_is_dropped_whole(value: str) -> None:
    assert parse_tracestate(value) is None
    assert parse(VALID, value) == TraceContext(VALID, None)


def test_the_spec_bounds_are_kept() -> None:
    most = ",".join(f"k{i}=v" for i in range(trace_context.MAX_TRACESTATE_MEMBERS))
    assert parse_tracestate(most) == most


def test_headers_propagate_the_context() -> None:
    assert TraceContext(VALID).headers() == {"traceparent": VALID}
    assert TraceContext(VALID, "a=1").headers() == {"traceparent": VALID, "tracestate": "a=1"}


@given(st.text(max_size=80))
def test_any_text_parses_or_is_ignored_without_raising(value: str) -> None:
    parsed = parse_traceparent(value)
    assert parsed is None or (len(parsed) == 55 and parsed.startswith("00-"))
    parse_tracestate(value)

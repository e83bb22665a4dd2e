"""The codec's bytes are what Lua, the worker and Spark read: packing shortcuts must not
change a single byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app import codec
from app.models.trace_context import TraceContext

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    topic=st.text(min_size=1, max_size=64),
    type_=st.sampled_from(codec.EVENT_TYPES),
    url=st.text(max_size=300),
    t=st.integers(0, 2**53),
    data=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
)
def test_event_packed_with_prepacked_data_is_byte_identical(topic, type_, url, t, data):
    whole = codec.pack_event(topic, type_, url, t, data)
    assert codec.pack_event(topic, type_, url, t, data, codec.pack_data(data)) == whole
    entry = codec.unpack_entry(b"0|" + whole)
    assert (entry.topic, entry.url, entry.t, entry.data) == (topic, url, t, data)


TRACE = TraceContext(f"00-{'ab' * 16}-{'cd' * 8}-01", "rojo=00f067aa0ba902b7")


@given(
    data=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    event_id=st.none() | st.text(min_size=1, max_size=30),
    state=st.none() | st.just("rojo=1,congo=2"),
)
def test_a_trace_context_rides_after_the_id_and_leaves_the_event_as_it_was(data, event_id, state):
    """The context is two optional fields after the id (nil when there is none): an
    event with a context reads as the same event, and untraced() gives back the
    5-element event a content id is derived from, byte for byte."""
    trace = TraceContext(TRACE.traceparent, state)
    plain = codec.pack_event("orders", "create", "https://o.test/1", 7, data)
    traced = codec.pack_event(
        "orders", "create", "https://o.test/1", 7, data, None, event_id, trace
    )
    prepacked = codec.pack_data(data)
    assert (
        codec.pack_event(
            "orders", "create", "https://o.test/1", 7, data, prepacked, event_id, trace
        )
        == traced
    )
    event = codec.unpack_entry(b"0|" + traced)
    assert (event.topic, event.data, event.stored_id) == ("orders", data, event_id)
    assert event.trace == trace
    assert codec.untraced(traced) == plain


def test_events_queued_before_traces_read_as_events_without_one():
    old = codec.unpack_entry(b"0|" + codec.pack_event("t", "create", "https://o.test/", 1, None))
    assert old.trace is None and old.traceparent is None and old.tracestate is None
    with_id = codec.pack_event("t", "create", "https://o.test/", 1, None, event_id="abc")
    assert codec.unpack_entry(b"0|" + with_id).trace is None
    assert len(with_id) == len(codec.pack_event("t", "create", "https://o.test/", 1, None)) + 4


@given(
    data=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    event_id=st.none() | st.text(min_size=1, max_size=10),
    trace=st.none() | st.just(TRACE) | st.just(TraceContext(TRACE.traceparent, None)),
    key=st.none() | st.text(min_size=1, max_size=10),
    schema=st.none() | st.integers(1, 1000),
    prepacked=st.booleans(),
)
def test_an_event_is_the_array_of_its_fields_without_the_absent_ones_at_its_end(
    data, event_id, trace, key, schema, prepacked
):
    """The one definition of the bytes (lib/*.lua and Spark read positions): every
    optional field keeps its place, and trailing absent ones are left off, whichever
    shortcut pack_event takes (none given at all is the common case: a plain event)."""
    fields = ["t", "create", "https://o.test/", 1, data, event_id, *(trace or (None, None)), key]
    fields.append(schema)
    while fields[-1] is None and len(fields) > 5:
        fields.pop()
    packed = None if data is None or not prepacked else codec.pack_data(data)
    made = codec.pack_event("t", "create", "https://o.test/", 1, data, packed, event_id, trace,
                            key, schema)  # fmt: skip
    assert made == codec._packb(fields, use_bin_type=True)

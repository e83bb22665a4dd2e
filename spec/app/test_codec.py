"""The codec's bytes are what Lua, the worker and Spark read: packing shortcuts must not
change a single byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app import codec

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

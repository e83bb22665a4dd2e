"""An event id's text: what earlier releases sent must stay what is sent (receivers and
the lake match events by it), however it is computed."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from app import codec
from app.models import event_ids
from app.models.trace_context import TraceContext


@given(st.binary(min_size=event_ids.ID_BYTES, max_size=32))
def test_the_text_is_unpadded_lower_base32_of_the_first_16_bytes(digest: bytes) -> None:
    written = base64.b32encode(digest[: event_ids.ID_BYTES]).decode().rstrip("=").lower()
    assert event_ids._text(digest) == written


def test_ids_are_those_earlier_releases_sent() -> None:
    # as base64.b32encode wrote it, before the text was computed by hand
    assert event_ids.for_publish("orders", "p-1", 0) == "ignvb2v273dzyq6vxohw3ineqe"


def test_a_trace_context_never_changes_an_event_id() -> None:
    """A publisher's retry carries another traceparent: its event must keep its id."""
    trace = TraceContext(f"00-{'ab' * 16}-{'cd' * 8}-01", "rojo=1")
    for stored in (None, "ignvb2v273dzyq6vxohw3ineqe"):
        plain = b"0|" + codec.pack_event(
            "orders", "create", "https://o.test/1", 5, {"a": 1}, None, stored
        )
        traced = b"0|" + codec.pack_event(
            "orders", "create", "https://o.test/1", 5, {"a": 1}, None, stored, trace
        )
        assert event_ids.of_entry(traced, codec.unpack_entry(traced)) == event_ids.of_entry(
            plain, codec.unpack_entry(plain)
        )

"""An event id's text: what earlier releases sent must stay what is sent (receivers and
the lake match events by it), however it is computed."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from app.models import event_ids


@given(st.binary(min_size=event_ids.ID_BYTES, max_size=32))
def test_the_text_is_unpadded_lower_base32_of_the_first_16_bytes(digest: bytes) -> None:
    written = base64.b32encode(digest[: event_ids.ID_BYTES]).decode().rstrip("=").lower()
    assert event_ids._text(digest) == written


def test_ids_are_those_earlier_releases_sent() -> None:
    # as base64.b32encode wrote it, before the text was computed by hand
    assert event_ids.for_publish("orders", "p-1", 0) == "ignvb2v273dzyq6vxohw3ineqe"

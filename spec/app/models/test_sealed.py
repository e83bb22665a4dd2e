"""Secrets sealed at rest: AES-256-GCM under a key derived from BUSBAR_SECRET_KEY, bound
to their place, opened by the current key or a former one, by no other."""

from __future__ import annotations

import base64

import pytest

from app.models.sealed import Sealer, Unsealable

KEY, FORMER, OTHER = b"k" * 32, b"f" * 32, b"o" * 32
PLACE = "subscriber tok header x-api-key"


def test_a_sealed_value_opens_in_its_place_and_shows_nothing_of_itself():
    sealer = Sealer(KEY)
    sealed = sealer.seal("s3cr3t-value", PLACE)
    assert sealer.open(sealed, PLACE) == "s3cr3t-value"
    assert "s3cr3t" not in sealed
    assert b"s3cr3t" not in base64.urlsafe_b64decode(sealed.split(".")[2])
    assert sealed != sealer.seal("s3cr3t-value", PLACE)  # a fresh nonce each time
    assert sealed.startswith(f"v1.{sealer.current_id}.")


def test_moved_to_another_place_or_altered_it_does_not_open():
    sealer = Sealer(KEY)
    sealed = sealer.seal("s3cr3t-value", PLACE)
    with pytest.raises(Unsealable, match="does not open") as moved:
        sealer.open(sealed, "subscriber other header x-api-key")
    assert "s3cr3t" not in moved.value.message
    version, kid, body = sealed.split(".")
    raw = bytearray(base64.urlsafe_b64decode(body))
    raw[-1] ^= 1
    with pytest.raises(Unsealable, match="does not open"):
        sealer.open(f"{version}.{kid}.{base64.urlsafe_b64encode(bytes(raw)).decode()}", PLACE)


def test_a_former_key_opens_what_it_sealed_and_an_unknown_key_is_named():
    old = Sealer(FORMER).seal("s3cr3t-value", PLACE)
    rotated = Sealer(KEY, [FORMER])
    assert rotated.open(old, PLACE) == "s3cr3t-value"
    assert not rotated.is_current(old) and rotated.is_current(rotated.seal("v", PLACE))
    with pytest.raises(Unsealable, match="BUSBAR_SECRET_KEY_PREVIOUS") as unknown:
        Sealer(KEY).open(old, PLACE)
    assert Sealer(FORMER).current_id in unknown.value.message
    assert "s3cr3t" not in unknown.value.message
    with pytest.raises(Unsealable):
        Sealer(OTHER, [KEY]).open(old, PLACE)

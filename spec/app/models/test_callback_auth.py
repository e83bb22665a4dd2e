"""The `auth` of POST /subscription: basic (the uuid) or a JWT per push, with an
optional audience; anything else is a 400 naming it."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.models.callback_auth import Auth
from app.models.subscription import parse_subscription

BODY = {"topics": ["orders"], "callback": "https://s.test/hook"}


def auth(value: object) -> Auth | None:
    return parse_subscription({**BODY, "auth": value}, allow_http=False).auth


def test_basic_jwt_and_a_jwt_for_an_audience():
    assert auth({"type": "basic"}) == Auth("basic")
    assert auth({"type": "jwt"}) == Auth("jwt")
    assert auth({"type": "jwt", "audience": "billing-api"}) == Auth("jwt", "billing-api")
    assert parse_subscription(BODY, allow_http=False).auth is None  # not given: kept
    assert Auth("basic").stored() == "basic"
    assert Auth("jwt", "a").stored() == '{"type":"jwt","audience":"a"}'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"type": "oauth"}, "auth.type must be one of basic, jwt"),
        ({}, "auth.type must be one of"),
        ({"type": "basic", "audience": "x"}, "audience is for the jwt type only"),
        ({"type": "jwt", "audience": ""}, "1 to 512 characters"),
        ({"type": "jwt", "audience": "a\nb"}, "printable ASCII"),
        ({"type": "jwt", "issuer": "x"}, "unknown field 'issuer'"),
        ("jwt", "must be a JSON object"),
    ],
)
def test_what_cannot_be_is_a_400_naming_it(value: object, message: str):
    with pytest.raises(InvalidInput, match=message):
        auth(value)

"""Whatever JSON a publisher puts in `data`, the answer is 204 or a 400 naming what is
wrong, never a 500; and what is accepted reaches the subscriber as valid JSON, equal to
what was sent."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import redis
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import codec
from app.models.keys import Keys
from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import ROOT, make_client, subscribe

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=25,
)
DATA = st.dictionaries(st.text(max_size=6), VALUES, max_size=5)


@pytest.fixture
def http(settings: Settings, redis_client: redis.Redis) -> FlaskClient:
    roomy = dataclasses.replace(settings, max_event_data=1 << 20)
    return create_app(roomy, redis_client).test_client()


def queued_data(redis_client: redis.Redis) -> list[object]:
    keys = Keys()
    found = []
    for batch_id in redis_client.lrange(keys.lane("sub", 10), 0, -1):
        for entry in redis_client.lrange(keys.batch("sub", batch_id.decode()), 3, -1):
            found.append(codec.unpack_entry(entry).delivery()["data"])
    return found


def representable(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**64
    if isinstance(value, dict):
        return all(representable(v) for v in value.values())
    if isinstance(value, list):
        return all(representable(v) for v in value)
    return True


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=DATA)
def test_any_data_is_accepted_whole_or_refused_by_name(
    http: FlaskClient, redis_client: redis.Redis, data: dict
):
    redis_client.flushdb()
    pub = make_client(http, "pub")
    subscribe(http, make_client(http, "sub"), ["orders"], max=10_000, timeout=60_000)
    body = json.dumps({"type": "create", "url": "https://o.test/1", "data": data})
    response = http.post("/topics/orders", data=body, headers=pub)
    if representable(data):
        assert response.status_code == 204, response.get_json()
        (delivered,) = queued_data(redis_client)
        assert json.loads(json.dumps(delivered, allow_nan=False)) == data
    else:
        assert response.status_code == 400
        assert queued_data(redis_client) == []
        error = response.get_json()["error"]
        assert "beyond 64 bits" in error or "not valid JSON" in error, error


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"n": 1e400}', "beyond the range of a double"),
        ('{"n": -1e400}', "beyond the range of a double"),
        ('{"n": NaN}', "NaN is not valid JSON"),
        ('{"a": {"b": [1, 18446744073709551616]}}', "data.a.b[1] is an integer beyond 64 bits"),
        ('{"n": -9223372036854775809}', "data.n is an integer beyond 64 bits"),
        ('{"n": ' + "[" * 5000 + "]" * 5000 + "}", "not valid JSON"),
        ('{"n": 1' + "0" * 5000 + "}", "not valid JSON"),
    ],
)
def test_hostile_numbers_and_nesting_are_400s_that_say_why(
    http: FlaskClient, raw: str, message: str
):
    pub = make_client(http, "pub")
    body = '{"type": "create", "url": "https://o.test/1", "data": ' + raw + "}"
    response = http.post("/topics/orders", data=body, headers=pub)
    assert response.status_code == 400
    assert message in response.get_json()["error"]
    assert http.get("/topics", headers=ROOT).get_json() == []  # nothing half-applied


def test_deep_but_legal_nesting_is_delivered_intact(http: FlaskClient, redis_client):
    pub = make_client(http, "pub")
    subscribe(http, make_client(http, "sub"), ["orders"])
    deep: object = 1
    for _ in range(400):
        deep = [deep]
    body = json.dumps({"type": "create", "url": "https://o.test/1", "data": {"d": deep}})
    assert http.post("/topics/orders", data=body, headers=pub).status_code == 204
    assert queued_data(redis_client) == [{"d": deep}]

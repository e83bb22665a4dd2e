"""GET and PUT /topics/<name>/retention in process against a real Redis: the default,
a topic's own set by its publisher or root and cleared with null, and every refusal
naming its problem with nothing changed. What a retention removes, from outside:
spec/integration/test_retention.py."""

from __future__ import annotations

import pytest
import redis
from flask.testing import FlaskClient

from app.models.keys import Keys
from spec.app.web.conftest import ROOT, make_client


@pytest.fixture
def pub(http: FlaskClient) -> dict[str, str]:
    headers = make_client(http, "pub")
    event = {"type": "create", "url": "https://o.test/1"}
    assert http.post("/topics/orders", json=event, headers=headers).status_code == 204
    return headers


def test_a_publisher_sets_its_topics_retention_and_null_clears_it(http: FlaskClient, pub):
    assert http.get("/topics/orders/retention", headers=pub).get_json() == {
        "topic": "orders", "retention_s": None, "effective_s": 0,
    }  # fmt: skip
    put = http.put("/topics/orders/retention", json={"retention_s": 86400}, headers=pub)
    assert put.status_code == 200
    assert put.get_json() == {"topic": "orders", "retention_s": 86400, "effective_s": 86400}
    other = make_client(http, "other")
    assert http.get("/topics/orders/retention", headers=other).get_json()["retention_s"] == 86400
    by_root = http.put("/topics/orders/retention", json={"retention_s": None}, headers=ROOT)
    assert by_root.get_json() == {"topic": "orders", "retention_s": None, "effective_s": 0}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({}, 400, "retention_s is required"),
        ({"retention_s": -1}, 400, "retention_s"),
        ({"retention_s": "1d"}, 400, "retention_s"),
        ({"retention_s": 2**60}, 400, "retention_s"),
        ({"retention_s": 1, "ttl": 2}, 400, "ttl"),
        ([1], 400, "a JSON object"),
    ],
)
def test_bad_input_names_the_problem_and_changes_nothing(
    http: FlaskClient, pub, redis_client: redis.Redis, body: object, status: int, says: str
):
    response = http.put("/topics/orders/retention", json=body, headers=pub)
    assert response.status_code == status and says in response.get_json()["error"]
    assert redis_client.hget(Keys().topic("orders"), "retention_s") is None


def test_only_the_publisher_or_root_sets_it_and_only_on_a_topic(
    http: FlaskClient, pub, redis_client: redis.Redis
):
    other = make_client(http, "other")
    refused = http.put("/topics/orders/retention", json={"retention_s": 60}, headers=other)
    assert refused.status_code == 403 and "publisher" in refused.get_json()["error"]
    missing = http.put("/topics/nope/retention", json={"retention_s": 60}, headers=ROOT)
    assert missing.status_code == 404
    assert http.get("/topics/nope/retention", headers=ROOT).status_code == 404
    assert not redis_client.exists(Keys().topic("nope"))  # no stray hash
    assert redis_client.hget(Keys().topic("orders"), "retention_s") is None

"""Security table: every route of the app, called by nobody, a stranger, another client,
the root key and the owner, and proof that nobody but the owner reaches the owner's data.

The world: `pub` published to `orders`; `sub` subscribes to it with a secret uuid and has
two dead letters; `other` is a legitimate client with a subscription of its own, trying
to reach theirs. Each row starts from that world afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
import redis
from flask import Flask
from werkzeug.test import TestResponse

from app.models.queue import JobQueue
from app.web import create_app
from app.web.context import web_context
from config.parsers import allowlist
from config.settings import DEV_CALLBACK_ALLOW, Settings
from dev.redis_server import free_port
from spec.app.delivery.driven import Driven
from spec.app.web.conftest import basic
from spec.conftest import ROOT_KEY

PUB, SUB, OTHER = "pub-token-5f0c1e", "sub-token-9a7d3b", "other-token-2e8f4c"
NAMES = {PUB: "pub", SUB: "sub", OTHER: "other"}
SUB_UUID = "sub-uuid-0d6a44"
SECRETS = (PUB, SUB, SUB_UUID, "sub-callback")
EVENT = {"type": "create", "url": "https://o.test/9"}
SUBSCRIPTION = {"topics": ["parcels"], "callback": "https://other.test/in"}


@dataclass(frozen=True)
class Row:
    """Statuses by caller; `anyone` is both no credentials and an unknown token."""

    path: str
    anyone: int
    owner: int
    other: int
    root: int
    body: Any = None
    owner_token: str = SUB


TABLE: dict[tuple[str, str], Row] = {
    ("GET", "/health"): Row("/health", 200, 200, 200, 200),
    ("GET", "/openapi.json"): Row("/openapi.json", 200, 200, 200, 200),
    ("GET", "/pulse"): Row("/pulse", 401, 204, 204, 204),
    ("GET", "/pulse/scaling"): Row("/pulse/scaling", 401, 204, 204, 204),
    ("GET", "/api_tokens"): Row("/api_tokens", 401, 403, 403, 200),
    ("POST", "/api_tokens"): Row("/api_tokens", 401, 403, 403, 201, {"name": "billing"}),
    ("DELETE", "/api_tokens/<token>"): Row(f"/api_tokens/{SUB}", 401, 403, 403, 204),
    ("DELETE", "/api_tokens/by_name/<name>"): Row("/api_tokens/by_name/sub", 401, 403, 403, 204),
    ("POST", "/topics/<name>"): Row("/topics/orders", 401, 204, 403, 403, EVENT, PUB),
    ("GET", "/topics"): Row("/topics", 401, 200, 200, 200),
    ("DELETE", "/topics/<name>"): Row("/topics/orders", 401, 204, 403, 204, None, PUB),
    ("POST", "/subscription"): Row("/subscription", 401, 204, 204, 403, SUBSCRIPTION),
    ("POST", "/subscriber"): Row("/subscriber", 401, 204, 204, 403, SUBSCRIPTION),
    ("GET", "/subscriptions"): Row("/subscriptions", 401, 200, 200, 200),
    ("GET", "/subscribers"): Row("/subscribers", 401, 200, 200, 200),
    ("DELETE", "/subscriber"): Row("/subscriber", 401, 204, 204, 403),
    ("DELETE", "/subscriber/topics/<name>"): Row("/subscriber/topics/orders", 401, 204, 404, 403),
    ("GET", "/subscriber/deadletters"): Row("/subscriber/deadletters", 401, 200, 200, 403),
    ("POST", "/subscriber/deadletters/replay"): Row(
        "/subscriber/deadletters/replay", 401, 202, 202, 403
    ),
    ("DELETE", "/subscriber/deadletters"): Row("/subscriber/deadletters", 401, 204, 204, 403),
    ("GET", "/subscriber/attempts"): Row("/subscriber/attempts", 401, 200, 200, 403),
    # sub's one batch was dead-lettered: nobody's is queued (test_attempts reads one)
    ("GET", "/subscriber/batches/<batch_id>"): Row("/subscriber/batches/1", 401, 404, 404, 403),
    ("GET", "/subscribers/<path:client>/batches/<batch_id>"): Row(
        "/subscribers/sub/batches/1", 401, 403, 403, 404
    ),
    ("POST", "/subscriber/pause"): Row("/subscriber/pause", 401, 200, 200, 403),
    ("POST", "/subscriber/resume"): Row("/subscriber/resume", 401, 200, 200, 403),
    ("POST", "/subscribers/<path:client>/pause"): Row("/subscribers/sub/pause", 401, 403, 403, 200),
    ("POST", "/subscribers/<path:client>/resume"): Row(
        "/subscribers/sub/resume", 401, 403, 403, 200
    ),
    ("GET", "/subscribers/<path:client>/attempts"): Row(
        "/subscribers/sub/attempts", 401, 403, 403, 200
    ),
    ("GET", "/metrics"): Row("/metrics", 401, 403, 403, 200),
    ("GET", "/console"): Row("/console", 200, 200, 200, 200),
    ("GET", "/console/<asset>"): Row("/console/console.js", 200, 200, 200, 200),
    ("GET", "/workers"): Row("/workers", 401, 403, 403, 200),
    ("GET", "/origins"): Row("/origins", 401, 403, 403, 200),
    ("GET", "/history"): Row("/history", 401, 403, 403, 200),
    ("GET", "/replays"): Row("/replays", 401, 403, 403, 200),
    # pub publishes orders: it may erase there; other publishes nothing
    ("POST", "/erasures"): Row(
        "/erasures", 401, 202, 403, 202, {"url": "https://o.test/9", "topics": ["orders"]}, PUB
    ),
    ("GET", "/erasures"): Row("/erasures", 401, 200, 200, 200),
    ("GET", "/topics/<name>/retention"): Row("/topics/orders/retention", 401, 200, 200, 200),
    ("PUT", "/topics/<name>/retention"): Row(
        "/topics/orders/retention", 401, 200, 403, 200, {"retention_s": 86400}, PUB
    ),
    ("GET", "/erasures/<erasure_id>"): Row("/erasures/er_0000000000000000", 401, 404, 404, 404),
    ("GET", "/subscribers/<path:client>/deadletters"): Row(
        "/subscribers/sub/deadletters", 401, 403, 403, 200
    ),
    ("POST", "/subscribers/<path:client>/deadletters/replay"): Row(
        "/subscribers/sub/deadletters/replay", 401, 403, 403, 202
    ),
    ("DELETE", "/subscribers/<path:client>/deadletters"): Row(
        "/subscribers/sub/deadletters", 401, 403, 403, 204
    ),
    ("GET", "/subscriber/secret"): Row("/subscriber/secret", 401, 200, 200, 403),
    ("GET", "/.well-known/jwks.json"): Row("/.well-known/jwks.json", 200, 200, 200, 200),
    ("POST", "/push-keys/rotate"): Row("/push-keys/rotate", 401, 403, 403, 200),
    ("POST", "/subscription/test"): Row("/subscription/test", 401, 200, 200, 403),
    ("POST", "/subscriber/test"): Row("/subscriber/test", 401, 200, 200, 403),
    ("POST", "/subscribers/<path:client>/test"): Row("/subscribers/sub/test", 401, 403, 403, 200),
    ("POST", "/subscriber/secret/rotate"): Row("/subscriber/secret/rotate", 401, 200, 200, 403),
    ("POST", "/subscribers/<path:client>/secret/rotate"): Row(
        "/subscribers/sub/secret/rotate", 401, 403, 403, 204
    ),
    ("POST", "/subscriptions/<path:client>/secret/rotate"): Row(
        "/subscriptions/sub/secret/rotate", 401, 403, 403, 204
    ),
    ("POST", "/filters/test"): Row(
        "/filters/test", 401, 200, 200, 200, {"filter": {"type": "create"}, "events": []}
    ),
    ("GET", "/destination-types"): Row("/destination-types", 401, 200, 200, 200),
    ("POST", "/transforms/test"): Row(
        "/transforms/test", 401, 200, 200, 200, {"transform": "data", "event": {"data": {}}}
    ),
    # nothing was delivered to anyone in this world: found by nobody, reached by the owner
    ("GET", "/subscriber/delivered/last"): Row("/subscriber/delivered/last", 401, 404, 404, 403),
    ("GET", "/subscribers/<path:client>/delivered/last"): Row(
        "/subscribers/sub/delivered/last", 401, 403, 403, 404
    ),
    ("GET", "/topics/<name>/schemas"): Row("/topics/orders/schemas", 401, 200, 200, 200),
    ("GET", "/topics/<name>/schemas/<event_type>"): Row(
        "/topics/orders/schemas/create", 401, 200, 200, 200
    ),
    ("GET", "/topics/<name>/schemas/<event_type>/versions/<int:version>"): Row(
        "/topics/orders/schemas/create/versions/1", 401, 200, 200, 200
    ),
    ("PUT", "/topics/<name>/schemas/<event_type>"): Row(
        "/topics/orders/schemas/create", 401, 200, 403, 200, {"type": "object"}, PUB
    ),
    ("DELETE", "/topics/<name>/schemas/<event_type>"): Row(
        "/topics/orders/schemas/create", 401, 204, 403, 204, None, PUB
    ),
    ("PATCH", "/topics/<name>/schemas/<event_type>/versions/<int:version>"): Row(
        "/topics/orders/schemas/create/versions/1", 401, 200, 403, 200, {"deprecated": True}, PUB
    ),
}


class World:
    def __init__(self, app: Flask, client: redis.Redis) -> None:
        self.app, self.client, self.http = app, client, app.test_client()

    def call(self, method: str, path: str, token: str | None, body: Any = None) -> TestResponse:
        headers = basic(token) if token else {}
        return self.http.open(path, method=method, json=body, headers=headers)

    def ok(self, method: str, path: str, token: str, body: Any = None) -> Any:
        response = self.call(method, path, token, body)
        assert response.status_code < 300, response.get_json()
        return response.get_json(silent=True)

    def reset(self) -> None:
        self.client.flushdb()
        for token, name in NAMES.items():
            self.ok("POST", "/api_tokens", ROOT_KEY, {"name": name, "token": token})
        dead_end = f"https://127.0.0.1:{free_port()}/sub-callback"  # refused at once
        sub = {"topics": ["orders"], "callback": dead_end, "uuid": SUB_UUID, "max": 2}
        self.ok("POST", "/subscription", SUB, {**sub, "max_attempts": 1})
        self.ok("POST", "/subscription", OTHER, SUBSCRIPTION)
        self.ok("POST", "/topics/orders", PUB, [EVENT, {**EVENT, "type": "update"}])
        self.ok("PUT", "/topics/orders/schemas/create", PUB, {"title": "anything goes"})
        self._fail_one_delivery()
        assert len(self.ok("GET", "/subscriber/deadletters", SUB)) == 2

    def _fail_one_delivery(self) -> None:
        """As a worker thread would: take the due job and run it against the dead callback."""
        with self.app.app_context():
            ctx = web_context()
        queue = JobQueue(ctx.redis, ctx.keys, ctx.scripts, "main", ctx.keys.shard_of(SUB))
        job = queue.acquire("w/0", 1)
        delivery = Driven(ctx.redis, ctx.keys, ctx.settings)  # the engine's own steps
        try:
            assert delivery.run(SUB, "w/0", job).kind == "failed"
        finally:
            delivery.close()

    def snapshot(self) -> tuple:
        """Everything of pub's and sub's that another client must not be able to change."""
        subscriptions = self.ok("GET", "/subscriptions", ROOT_KEY)
        topics = self.ok("GET", "/topics", ROOT_KEY)
        return (
            [s for s in subscriptions if s["uuid"] == SUB_UUID],
            [t for t in topics if t["name"] == "orders"],
            self.ok("GET", "/subscriber/deadletters", SUB),
            self.ok("GET", "/api_tokens", ROOT_KEY),
            self.sub_secret(),
            self.ok("GET", "/topics/orders/schemas", ROOT_KEY),
        )

    def sub_secret(self) -> str:
        return self.ok("GET", "/subscriber/secret", SUB)["secret"]


@pytest.fixture
def world(settings: Settings, redis_client: redis.Redis) -> World:
    opened = replace(settings, callback_allow=allowlist(DEV_CALLBACK_ALLOW))  # as `busbar dev`
    the_world = World(create_app(opened, redis_client), redis_client)
    the_world.reset()
    return the_world


def test_every_route_has_a_row(world: World):
    routes = {
        (method, rule.rule)
        for rule in world.app.url_map.iter_rules()
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    assert routes == set(TABLE), "a route was added or removed: give it a row in TABLE"


@pytest.mark.parametrize(("method", "rule"), list(TABLE))
def test_who_may_call_what(world: World, method: str, rule: str):
    row = TABLE[(method, rule)]
    before = world.snapshot()
    for token in (None, "wrong-token-000"):
        response = world.call(method, row.path, token, row.body)
        assert response.status_code == row.anyone, (token, response.get_json())
        if row.anyone == 401:
            assert response.headers["WWW-Authenticate"].startswith("Basic")
            assert response.get_json()["error"]
    response = world.call(method, row.path, OTHER, row.body)
    assert response.status_code == row.other, response.get_json()
    sub_secret = world.sub_secret()
    assert not [s for s in (*SECRETS, sub_secret) if s in response.get_data(as_text=True)]
    assert world.snapshot() == before
    response = world.call(method, row.path, ROOT_KEY, row.body)
    assert response.status_code == row.root
    assert sub_secret not in response.get_data(as_text=True)  # root never reads a secret
    world.reset()
    assert world.call(method, row.path, row.owner_token, row.body).status_code == row.owner


def test_a_publisher_cannot_publish_to_anothers_topic(world: World):
    response = world.call("POST", "/topics/orders", OTHER, EVENT)
    assert response.status_code == 403
    assert "orders" in response.get_json()["error"]
    (orders,) = [t for t in world.ok("GET", "/topics", ROOT_KEY) if t["name"] == "orders"]
    assert orders["publisher_name"] == "pub" and orders["events"] == 2


def test_a_subscriber_sees_only_its_own_subscription_and_dead_letters(world: World):
    (own,) = world.ok("GET", "/subscriptions", OTHER)
    assert own["callback"] == SUBSCRIPTION["callback"]
    assert world.ok("GET", "/subscriber/deadletters", OTHER) == []
    assert world.ok("POST", "/subscriber/deadletters/replay", OTHER) == {"replayed": 0}
    world.ok("DELETE", "/subscriber/deadletters", OTHER)
    world.ok("DELETE", "/subscriber", OTHER)
    assert len(world.ok("GET", "/subscriber/deadletters", SUB)) == 2
    assert [s["uuid"] for s in world.ok("GET", "/subscriptions", ROOT_KEY)] == [SUB_UUID]

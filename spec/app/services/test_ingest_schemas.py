"""Event schemas at ingest, on a real server (app/services/topic_rules.py's checked
with app/services/schemas.py): a schema set, replaced or removed through one process
holds at the very next publish through another (whose cache named the old rules
version), a bulk publish with one bad event queues none of them, and each queued event
carries the version its data was checked against."""

from __future__ import annotations

import pytest
import redis

from app import codec
from app.errors import InvalidInput
from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.schemas import SchemaBounds
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from app.services.schemas import SchemaStore
from config.settings import Settings

NOW = 1_767_225_600_000
TOTAL = {
    "type": "object",
    "properties": {"total": {"type": "number", "minimum": 0}},
    "required": ["total"],
}


def order(i: int, data: dict | None, type_: str = "create") -> Event:
    return Event(type_, f"https://o.test/{i}", NOW, data)


def queued(client: redis.Redis, keys: Keys) -> list[codec.QueuedEvent]:
    found = []
    for batch_id in client.lrange(keys.lane("sub", 10), 0, -1):
        entries = client.lrange(keys.batch("sub", batch_id.decode()), 3, -1)
        found += [codec.unpack_entry(e) for e in entries]
    return found


def test_schemas_hold_from_the_next_publish_in_every_process(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    TokenStore(redis_client, keys).create("pub", "pub")
    body = {"topics": ["orders"], "callback": "https://s.test/in", "max": 100, "timeout": 60}
    SubscriberStore(redis_client, keys, scripts).subscribe(
        "sub", parse_subscription(body, allow_http=False), NOW
    )
    web_a, web_b = (Ingest(redis_client, keys, scripts, Settings()) for _ in range(2))
    schemas = SchemaStore(redis_client, keys, scripts)
    web_b.publish("orders", "pub", [order(0, {"total": -1})], NOW)  # b caches: no rules

    put = schemas.put("orders", "pub", "create", TOTAL, SchemaBounds(), NOW)
    assert (put["version"], put["changed"]) == (1, True)
    with pytest.raises(InvalidInput) as refused:
        web_b.publish("orders", "pub", [order(1, {"total": 3}), order(2, {"total": -2})], NOW)
    assert refused.value.message == (
        "event 1 breaks the create schema of topic orders (version 1) at data/total: "
        "-2 is less than the minimum of 0 (rule /properties/total/minimum)"
    )
    web_b.publish("orders", "pub", [order(3, {"total": 3}), order(4, None, "update")], NOW)

    tighter = {**TOTAL, "required": ["total", "currency"]}
    assert schemas.put("orders", None, "create", tighter, SchemaBounds(), NOW)["version"] == 2
    with pytest.raises(InvalidInput, match=r"event 0 .* \(version 2\) at data: .*currency"):
        web_a.publish("orders", "pub", [order(5, {"total": 3})], NOW)
    web_a.publish("orders", "pub", [order(6, {"total": 3, "currency": "EUR"})], NOW)

    schemas.delete("orders", "pub", "create")
    web_b.publish("orders", "pub", [order(7, {"total": -7})], NOW)

    seen = [(e.url.rsplit("/", 1)[1], e.schema) for e in queued(redis_client, keys)]
    assert seen == [("0", None), ("3", 1), ("4", None), ("6", 2), ("7", None)]
    again = schemas.put("orders", "pub", "create", TOTAL, SchemaBounds(), NOW)
    assert again["version"] == 3  # a number never names two schemas while the topic lives

"""Autodrop's fair shares on a real server: a flood at one subscriber is shed before a
byte of another's queue within its share, oldest lowest-priority first, counted and
named; and the water level itself, as a property."""

from __future__ import annotations

import logging
import time

from hypothesis import given
from hypothesis import strategies as st

from app.models.event import Event
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.fair_share import level, weigh
from app.services.ingest import Ingest
from app.services.shedding import Shedding, domains
from config.settings import Settings
from spec.view import counter, noted

weights = st.lists(st.floats(0, 1e9), min_size=1, max_size=30)


@given(weights, st.floats(0, 3e10))
def test_cutting_everything_above_the_level_frees_what_is_needed(ws: list[float], need: float):
    water = level(ws, need)
    freed = sum(max(0.0, w - water) for w in ws)
    if need >= sum(ws):
        assert water == 0.0  # not enough anywhere: everything goes
    else:
        assert abs(freed - need) <= 1e-6 * max(1.0, need, sum(ws))
        assert water <= max(ws)


@given(weights)
def test_nothing_needed_sheds_no_one(ws: list[float]):
    assert level(ws, 0) >= max(ws)


def now_ms() -> int:
    return int(time.time() * 1000)


class Two:
    """Two subscribers of one publisher's topics: `flood` (down, everything queued) and
    `calm`, each with its own routes."""

    def __init__(self, client, keys, scripts) -> None:
        self.client, self.keys, self.scripts = client, keys, scripts
        self.settings = Settings(allow_http=True, publish_rate=0)
        tokens = TokenStore(client, keys)
        for token in ("pub", "flood", "calm"):
            tokens.create(f"{token}-service", token)
        self.store = SubscriberStore(client, keys, scripts)
        self.ingest = Ingest(client, keys, scripts, self.settings)

    def subscribe(self, token: str, topics: list, **extra) -> None:
        body = {"topics": topics, "callback": "https://s.test/in", **extra}
        self.store.subscribe(token, parse_subscription(body, allow_http=True), now_ms())

    def publish(self, topic: str, n: int, start: int = 0, type_: str = "create", size: int = 10):
        now = now_ms()
        pad = "x" * size
        for first in range(start, start + n, 1000):
            events = [Event(type_, f"https://o.test/{i}", now, {"i": i, "p": pad})
                      for i in range(first, min(start + n, first + 1000))]  # fmt: skip
            self.ingest.publish(topic, "pub", events, now)

    def queued(self, token: str) -> int:
        return int(self.client.hget(self.keys.home(token).event_gauge, token) or 0)

    def tight(self, free: int, min_free: int) -> Shedding:
        """Autodrop as if Redis may use only `free` more bytes than it does now."""
        probe = Shedding(self.client, self.keys, self.scripts, self.settings)
        (domain,) = domains(self.client, self.keys)
        used = probe.settings.redis_max_mem - probe.free_bytes(domain)
        limits = Settings(redis_max_mem=used + free, redis_min_free=min_free)
        return Shedding(self.client, self.keys, self.scripts, limits)


def test_a_flood_is_shed_before_anything_of_a_subscriber_within_its_share(
    redis_client, keys, scripts, caplog
):
    two = Two(redis_client, keys, scripts)
    routes = [{"topic": "orders", "priority": 0, "types": ["delete"]}, {"topic": "orders"}]
    two.subscribe("flood", routes, max=10)
    two.subscribe("calm", ["invoices"], max=1000, timeout=3_600_000)  # one open batch
    two.publish("orders", 3000, size=1000)  # the flood's lane 10: about 3 MB
    two.publish("orders", 20, start=5000, type_="delete", size=1000)  # the flood's lane 0
    two.publish("invoices", 200, start=9000, size=1000)
    with caplog.at_level(logging.WARNING):  # 1 MB to free: Lua's own memory is noise
        dropped = two.tight(free=-200_000, min_free=400_000).autodrop(now_ms())
    assert dropped > 0
    assert two.queued("calm") == 200  # within its share: nothing lost
    assert two.queued("flood") == 3020 - dropped
    # the flood's oldest batches of its lowest lane went first; its lane 0 is whole
    lane10 = redis_client.lrange(keys.lane("flood", 10), 0, -1)
    assert [int(b) for b in lane10] == sorted(int(b) for b in lane10)
    assert redis_client.llen(keys.lane("flood", 0)) == 2
    assert int(redis_client.hget(keys.subscriber("flood"), "autodropped")) == dropped
    assert redis_client.hget(keys.subscriber("calm"), "autodropped") is None
    assert counter(redis_client, keys, "events.autodropped") == dropped
    shed = [r.getMessage() for r in caplog.records if "over its share" in r.getMessage()]
    assert shed and all("flood-service" in m for m in shed)  # named by name
    told = noted(redis_client, keys.home("flood").operations)
    assert sum(t["events"] for t in told) == dropped  # on busbar_operations, every event
    assert {(t["kind"], t["subscriber"], t["reason"]) for t in told} == {
        ("subscriber.dropped", "flood-service", "quota")
    }


def test_large_events_weigh_for_their_bytes_not_their_count(redis_client, keys, scripts):
    """400 events of 8 KiB hold more than 2,000 of 100 bytes: the large ones are over
    the share, whatever the counts say."""
    two = Two(redis_client, keys, scripts)
    two.subscribe("flood", ["orders"], max=10)
    two.subscribe("calm", ["invoices"], max=100)
    two.publish("orders", 400, size=8192)
    two.publish("invoices", 2000, start=9000, size=100)
    (domain,) = domains(redis_client, keys)
    sizes = {q.token: q.bytes for q in weigh(redis_client, keys, domain.shards)}
    assert sizes["flood"] > 2 * sizes["calm"]
    two.tight(free=0, min_free=500_000).autodrop(now_ms())
    assert two.queued("calm") == 2000
    assert two.queued("flood") < 400


def test_when_every_queue_is_over_the_level_each_is_cut_to_it(redis_client, keys, scripts):
    """Memory so short that the level falls under both: both lose, the larger more, and
    neither is emptied while the other still holds more than it."""
    two = Two(redis_client, keys, scripts)
    two.subscribe("flood", ["orders"], max=10)
    two.subscribe("calm", ["invoices"], max=10)
    two.publish("orders", 3000, size=1000)
    two.publish("invoices", 1000, start=9000, size=1000)
    (domain,) = domains(redis_client, keys)
    held = sum(q.bytes for q in weigh(redis_client, keys, domain.shards))
    need = int(held * 0.8)
    two.tight(free=-need // 2, min_free=need // 4).autodrop(now_ms())
    flood, calm = two.queued("flood"), two.queued("calm")
    assert 0 < calm < 1000 and 0 < flood < 3000
    assert abs(flood - calm) <= 20  # cut to one level, give or take a batch each

"""The Monitor's log line on a real server: the bus-wide figures, and the series of only
the subscribers with the most events queued; GET /metrics's snapshot keeps every one."""

from __future__ import annotations

import time

from app.models.event import Event
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services import metrics
from app.services.ingest import Ingest
from config.settings import Settings

IDLE = 40
TOPICS = {"q1": "one", "q2": "two", "q3": "three"}  # each busy subscriber's own


def bus_with_three_queues(client, keys, scripts) -> Settings:
    """`idle0..` subscribers with nothing queued; `q1`, `q2`, `q3` with 1, 2, 3 events."""
    settings = Settings(allow_http=True, publish_rate=0)
    tokens, store = TokenStore(client, keys), SubscriberStore(client, keys, scripts)
    now = int(time.time() * 1000)
    tokens.create("pub", "pub")
    for name in [f"idle{i}" for i in range(IDLE)] + ["q1", "q2", "q3"]:
        tokens.create(f"{name}-client", name)
        topic = TOPICS.get(name, "quiet")
        body = {"topics": [topic], "callback": "https://s.test/in", "timeout": 3_600_000}
        store.subscribe(name, parse_subscription(body, allow_http=True), now)
    ingest = Ingest(client, keys, scripts, settings)
    for n in (1, 2, 3):
        events = [Event("create", f"https://o.test/{i}", now, {"i": i}) for i in range(n)]
        ingest.publish(TOPICS[f"q{n}"], "pub", events, now)
    return settings


def test_the_line_names_the_busiest_subscribers_and_counts_the_rest(redis_client, keys, scripts):
    settings = bus_with_three_queues(redis_client, keys, scripts)
    line = metrics.one_line(metrics.collect(redis_client, keys, settings, most=2))
    assert "subscriber.queue.events{subscriber=q3-client}=3" in line
    assert "subscriber.queue.events{subscriber=q2-client}=2" in line
    assert "q1-client" not in line and "idle" not in line
    assert f"subscribers.omitted={IDLE + 1}" in line
    assert "events.added=6" in line  # the bus-wide figures whole


def test_metrics_keeps_every_subscriber(redis_client, keys, scripts):
    settings = bus_with_three_queues(redis_client, keys, scripts)
    snapshot = metrics.collect(redis_client, keys, settings)
    paused = next(m for m in snapshot.metrics if m.name == "subscriber.paused")
    assert len(paused.samples) == IDLE + 3
    assert all(m.name != "subscribers.omitted" for m in snapshot.metrics)

"""GET /metrics read back with prometheus_client's own parser: exact values, unique
series when client names repeat, no token in any label, the latency histogram."""

from __future__ import annotations

import json
import time

import redis
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from app.delivery.flight import Flight
from app.lua import Scripts
from app.models.attempt_result import answered
from app.models.keys import Keys
from app.models.queue import JobQueue
from config.settings import Settings
from spec.app.delivery.driven import Driven
from spec.app.web.conftest import ROOT, basic, subscribe


def scrape(http: FlaskClient) -> dict[str, list[tuple[dict, float]]]:
    response = http.get("/metrics", headers=ROOT)
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    samples: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def one(samples: dict, name: str, **labels: str) -> float:
    (value,) = [v for lab, v in samples[name] if lab == labels]
    return value


def test_publishing_moves_the_counters_and_gauges(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(3)]
    http.post("/topics/orders", json=events, headers=pub)
    samples = scrape(http)
    assert one(samples, "busbar_events_published_total") == 3
    assert one(samples, "busbar_events_added_total") == 3
    assert one(samples, "busbar_subscriber_queue_events", subscriber="sub") == 3
    assert one(samples, "busbar_jobs_count", queue="main", status="scheduled") == 1
    assert one(samples, "busbar_redis_used_memory") > 0
    assert "busbar_delivery_latency_ms_bucket" not in samples  # no batch acknowledged yet


def test_values_are_exact(http: FlaskClient, redis_client: redis.Redis, keys: Keys):
    redis_client.hset(keys.shard(1).counters, mapping={"events.published": 10485760,
                                              "delivery.events": 9007199254740991})  # fmt: skip
    samples = scrape(http)
    assert one(samples, "busbar_events_published_total") == 10485760
    assert one(samples, "busbar_delivery_events_total") == 9007199254740991
    assert one(samples, "busbar_redis_max_mem") == 52428800


def test_clients_sharing_a_name_share_one_series_without_their_tokens(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, pub
):
    """Clients made before a name was one client's (seeded as that code wrote them)."""
    tokens = ["billing-token-aaaa", "billing-token-bbbb"]
    for token in tokens:
        redis_client.hsetnx(keys.tokens, token, "billing")
        subscribe(http, basic(token), ["orders"])
    http.post("/topics/orders", json=[{"type": "create", "url": "https://o.test/1"}], headers=pub)
    response = http.get("/metrics", headers=ROOT).get_data(as_text=True)
    samples = scrape(http)
    queued = [(lab, v) for lab, v in samples["busbar_subscriber_queue_events"]]
    assert queued == [({"subscriber": "billing"}, 2)]  # one series, both clients' events
    assert not any(token in response for token in tokens)


def test_latency_histogram_from_the_acknowledgement_buckets(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    # what the ack script writes: per batch, one count in its (non-cumulative) bucket
    redis_client.hset(keys.shard(1).counters, mapping={"latency.le.1": 2, "latency.le.4": 3,
                                              "latency.le.1048576": 1, "latency.le.inf": 4,
                                              "latency.batches_ms": 1234567})  # fmt: skip
    samples = scrape(http)
    bucket = {lab["le"]: v for lab, v in samples["busbar_delivery_latency_ms_bucket"]}
    assert bucket["1.0"] == 2 and bucket["2.0"] == 2 and bucket["4.0"] == 5
    assert bucket["524288.0"] == 5 and bucket["1.048576e+06"] == 6 and bucket["+Inf"] == 10
    assert len(bucket) == 22  # 1, 2, 4 ... 1048576 ms, +Inf
    assert one(samples, "busbar_delivery_latency_ms_count") == 10
    assert one(samples, "busbar_delivery_latency_ms_sum") == 1234567


def test_a_deleted_clients_leftover_gauge_never_shows_its_token(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    redis_client.hset(keys.home("gone-client-token-77").event_gauge, "gone-client-token-77", 5)
    text = http.get("/metrics", headers=ROOT).get_data(as_text=True)
    assert "gone-client-token-77" not in text
    assert one(scrape(http), "busbar_subscriber_queue_events", subscriber="(deleted client)") == 5


def test_subscriber_failures_when_the_workers_count_them(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, sub
):
    subscribe(http, sub, ["orders"])
    assert "busbar_subscriber_failures_total" not in scrape(http)
    redis_client.hset(keys.subscriber("sub"), "failures", 7)
    assert one(scrape(http), "busbar_subscriber_failures_total", subscriber="sub") == 7


def test_events_dropped_unsent_are_counted_per_subscriber_and_reason(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, sub
):
    subscribe(http, sub, ["orders"])
    assert "busbar_subscriber_events_dropped_total" not in scrape(http)  # nothing dropped
    redis_client.hset(keys.subscriber("sub"), mapping={"expired": 3, "autodropped": 40})
    samples = scrape(http)
    assert one(samples, "busbar_subscriber_events_dropped_total", subscriber="sub",
               reason="autodropped") == 40  # fmt: skip
    assert one(samples, "busbar_subscriber_events_dropped_total", subscriber="sub",
               reason="expired") == 3  # fmt: skip
    listed = http.get("/subscriptions", headers=ROOT).get_json()
    assert listed[0]["dropped"] == {
        "expired": 3,
        "autodropped": 40,
        "deadletters_trimmed": 0,
        "transformed_out": 0,
    }


def test_an_open_circuit_is_a_gauge_with_when_it_opened_and_is_probed_next(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, sub
):
    subscribe(http, sub, ["orders"])
    assert one(scrape(http), "busbar_subscriber_circuit_open", subscriber="sub") == 0
    assert "busbar_subscriber_circuit_opened_at_ms{" not in http.get("/metrics", headers=ROOT).text
    fields = {"circuit_at": 1_800_000_000_000, "next_attempt_at": 1_800_000_030_000}
    redis_client.hset(keys.subscriber("sub"), mapping=fields)
    samples = scrape(http)
    assert one(samples, "busbar_subscriber_circuit_open", subscriber="sub") == 1
    assert one(samples, "busbar_subscriber_circuit_opened_at_ms", subscriber="sub") == 1.8e12
    assert one(samples, "busbar_subscriber_circuit_next_probe_at_ms", subscriber="sub") == (
        1_800_000_030_000
    )


def test_each_lane_tells_the_age_of_its_oldest_batch(http: FlaskClient, pub, sub):
    routes = [{"topic": "orders", "priority": 2, "types": ["delete"]}, {"topic": "orders"}]
    subscribe(http, sub, routes)
    old = int(time.time() * 1000) - 60_000  # a timestamp is the event's; age is the batch's
    events = [{"type": t, "url": f"https://o.test/{t}", "timestamp": old}
              for t in ("create", "delete")]  # fmt: skip
    http.post("/topics/orders", json=events, headers=pub)
    time.sleep(0.05)
    samples = scrape(http)
    for lane in ("2", "10"):
        age = one(samples, "busbar_subscriber_queue_oldest_age_ms", subscriber="sub", lane=lane)
        assert 50 <= age < 30_000
    assert len(samples["busbar_subscriber_queue_oldest_age_ms"]) == 2  # empty lanes: none


def test_deliveries_in_flight_per_subscriber(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, settings: Settings, pub, sub
):
    """One delivery marked at concurrency 1, a count of partitions in flight above it:
    two flights begun by the delivery steps show as 2, and 1 once one is acknowledged."""
    subscribe(http, sub, ["orders"], max=1, timeout=0, concurrency=4)
    assert one(scrape(http), "busbar_subscriber_in_flight", subscriber="sub") == 0
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(8)]
    assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
    queues = [JobQueue(redis_client, keys, Scripts(redis_client), "main", n)
              for n in range(keys.shards)]  # fmt: skip
    delivery = Driven(redis_client, keys, settings)  # the engine's own steps
    flights = []
    for worker in ("a.1.x/0", "a.1.x/1"):
        taken = delivery.take(queues, worker)
        assert taken is not None and isinstance(taken.flight, Flight)
        flights.append(taken.flight)
    assert one(scrape(http), "busbar_subscriber_in_flight", subscriber="sub") == 2
    assert delivery.finish(flights[0], answered(200)).kind == "delivered"
    assert one(scrape(http), "busbar_subscriber_in_flight", subscriber="sub") == 1
    delivery.close()
    subscribe(http, sub, ["orders"], max=1, timeout=0)  # back to 1: drains the old layout
    assert one(scrape(http), "busbar_subscriber_in_flight", subscriber="sub") == 1


def test_a_worker_of_the_next_release_reporting_origins_breaks_no_scrape(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    """A rolling upgrade runs workers of two releases side by side: a row with a figure
    this release does not know is shown without it, on GET /metrics and GET /origins
    (both answered 500 before)."""
    row = {"origin": "http://b:80", "limit": 64, "ceiling": 4096, "open": 3, "connecting": 0,
           "waiting": 1, "answer_ms": 20.0, "reason": "start", "changed_ms": 10, "workers": 1,
           "late_connects": 7}  # fmt: skip
    at = int(time.time() * 1000)
    redis_client.hset(keys.catalog.origins, "next", json.dumps({"at": at, "origins": [row]}))
    samples = scrape(http)
    assert one(samples, "busbar_origin_connections_limit", origin="http://b:80") == 64
    listed = http.get("/origins", headers=ROOT)
    assert listed.status_code == 200
    assert [(o["origin"], o["waiting"]) for o in listed.get_json()] == [("http://b:80", 1)]
    assert "late_connects" not in listed.get_json()[0]

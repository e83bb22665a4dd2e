"""POST /erasures and the receipts, in process against a real Redis: what is refused
(400 or 403 naming the problem, nothing recorded), who sees what, and an erasure cut
into many slices (as a killed worker's job comes back and goes on) counting exactly
what one uninterrupted run counts. From outside, with real processes, on both layouts:
spec/integration/test_erasure.py."""

from __future__ import annotations

import itertools
import json
import time

import pytest
import redis
from flask.testing import FlaskClient

from app.lua import Scripts
from app.models import lakes
from app.models.keys import Keys, keys_for
from app.services.erasure import Eraser
from config.settings import Settings
from spec.app.web.conftest import ROOT, make_client, subscribe

URL = "https://people.test/alice"


def publish(http: FlaskClient, headers: dict[str, str], topic: str, urls: list[str]) -> None:
    events = [{"type": "update", "url": u, "data": {"n": i}} for i, u in enumerate(urls)]
    assert http.post(f"/topics/{topic}", json=events, headers=headers).status_code == 204


@pytest.fixture
def topics(http: FlaskClient) -> tuple[dict[str, str], dict[str, str]]:
    """`pub` publishes `orders`, `other` publishes `people`."""
    pub, other = make_client(http, "pub"), make_client(http, "other")
    publish(http, pub, "orders", [URL])
    publish(http, other, "people", [URL])
    return pub, other


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "a url or a key"),
        ({"url": URL, "key": "k"}, "a url or a key"),
        ({"topics": ["orders"]}, "a url or a key"),
        ({"url": ""}, "url must be"),
        ({"url": "x" * 1025}, "url must be"),
        ({"key": "a\nb"}, "key must hold no control characters"),
        ({"url": URL, "topics": []}, "topics must be a non-empty list"),
        ({"url": URL, "topics": "orders"}, "topics must be a non-empty list"),
        ({"url": URL, "topics": ["nope"]}, "no topic nope"),
        ({"url": URL, "before": 2**52}, "is in the future"),
        ({"url": URL, "before": -1}, "before"),
        ({"url": URL, "who": 1}, "who"),
        ({"url": None}, "null is not allowed"),
        ([URL], "a JSON object"),
    ],
)
def test_bad_input_is_a_400_naming_it_and_records_nothing(
    http: FlaskClient, topics: object, redis_client: redis.Redis, body: object, says: str
):
    response = http.post("/erasures", json=body, headers=ROOT)
    assert response.status_code == 400, response.get_json()
    assert says in response.get_json()["error"]
    assert redis_client.zcard(Keys().catalog.erasures) == 0


def test_a_client_erases_on_its_own_topics_only(http: FlaskClient, topics, redis_client):
    pub, other = topics
    refused = http.post("/erasures", json={"url": URL, "topics": ["people"]}, headers=pub)
    assert refused.status_code == 403
    assert "people is not one" in refused.get_json()["error"]
    nobody = make_client(http, "nobody")
    none = http.post("/erasures", json={"url": URL}, headers=nobody)
    assert none.status_code == 403 and "publishes none" in none.get_json()["error"]
    assert redis_client.zcard(Keys().catalog.erasures) == 0

    mine = http.post("/erasures", json={"url": URL}, headers=pub)
    assert mine.status_code == 202
    receipt = mine.get_json()
    assert receipt["topics"] == ["orders"] and receipt["by"] == "pub"  # its own, not all
    assert http.get(f"/erasures/{receipt['id']}", headers=other).status_code == 404
    assert http.get("/erasures", headers=other).get_json() == []
    assert [e["id"] for e in http.get("/erasures", headers=pub).get_json()] == [receipt["id"]]
    by_root = http.post("/erasures", json={"key": "k"}, headers=ROOT).get_json()
    assert by_root["topics"] is None and by_root["by"] == "root"
    listed = [e["id"] for e in http.get("/erasures", headers=ROOT).get_json()]
    assert listed == [by_root["id"], receipt["id"]]  # newest first
    assert "by_token" not in str(http.get("/erasures", headers=ROOT).get_json())
    assert http.get("/erasures/er_0000000000000000", headers=ROOT).status_code == 404


def _erase_queued(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys, slices: bool
) -> tuple[dict, int]:
    """Three subscribers (one at concurrency 4) with the url's events among others,
    queued (no worker); the erasure run to the end in slices of one step, or at once."""
    pub = make_client(http, "pub")
    for name, extra in (("s1", {}), ("s2", {"concurrency": 4}), ("s3", {"max": 2})):
        subscribe(http, make_client(http, name), ["orders"], **extra)
    publish(http, pub, "orders", [URL if i % 3 == 0 else f"{URL}-not-{i}" for i in range(30)])
    erasure = http.post("/erasures", json={"url": URL}, headers=ROOT).get_json()["id"]
    ticks = itertools.count()
    eraser = Eraser(redis_client, keys, Scripts(redis_client), clock=lambda: next(ticks))
    runs = 1
    while eraser.run(erasure, 1.5 if slices else 1e9, int(time.time() * 1000)) != "done":
        runs += 1
    return http.get(f"/erasures/{erasure}", headers=ROOT).get_json(), runs


def test_an_erasure_cut_into_slices_counts_what_one_run_counts(
    http: FlaskClient, redis_client: redis.Redis, settings: Settings
):
    keys = keys_for(settings)
    sliced, runs = _erase_queued(http, redis_client, keys, slices=True)
    assert runs > 10  # a step a run: it went on where it was each time
    redis_client.flushdb()
    whole, one = _erase_queued(http, redis_client, keys, slices=False)
    assert one == 1
    assert sliced["stores"] == whole["stores"]
    assert whole["stores"]["queued"]["events"] == 3 * 10  # 10 of the url's, 3 subscribers
    assert whole["state"] == "done" and whole["url_fingerprint"].startswith("sha256:")
    queued = b"".join(
        entry for k in redis_client.keys(b"*:batch:*") for entry in redis_client.lrange(k, 0, -1)
    )
    assert queued.count(URL.encode()) == 3 * 20  # the others' urls start with it


def test_an_erasure_waits_for_every_live_lake_and_not_for_a_stale_one(
    http: FlaskClient, redis_client: redis.Redis, settings: Settings
):
    """A lake an ingest has registered holds the erasure `running` (Redis erased,
    `redis_done_at` set, the value still known) until the lake records its own erasure;
    a lake silent for a week does not, and its receipt says it is stale."""
    keys, now = keys_for(settings), int(time.time() * 1000)
    live, stale = lakes.lake_id("/data/lake"), lakes.lake_id("/old/lake")
    redis_client.hset(keys.catalog.lakes, mapping={
        live: json.dumps({"path": "/data/lake", "seen_at": now}),
        stale: json.dumps({"path": "/old/lake", "seen_at": now - lakes.LAKE_STALE_MS - 1}),
    })  # fmt: skip
    subscribe(http, make_client(http, "s1"), ["orders"])
    publish(http, make_client(http, "pub"), "orders", [URL, URL])
    erasure = http.post("/erasures", json={"url": URL}, headers=ROOT).get_json()["id"]
    eraser = Eraser(redis_client, keys, Scripts(redis_client))
    assert eraser.run(erasure, 10, now) == "lakes"
    receipt = http.get(f"/erasures/{erasure}", headers=ROOT).get_json()
    assert receipt["state"] == "running" and receipt["redis_done_at"] == now
    assert receipt["url"] == URL and receipt["stores"]["queued"]["events"] == 2
    assert receipt["lakes"] == [{"path": "/data/lake", "state": "pending"},
                                {"path": "/old/lake", "state": "stale"}]  # fmt: skip
    assert eraser.run(erasure, 10, now + 1) == "lakes"  # Redis is not passed again
    removed = {"events": 4, "attempts": 1, "files_rewritten": 2, "bytes_rewritten": 10, "at": now}
    redis_client.hset(keys.catalog.erasure(erasure), f"lake:{live}", json.dumps(removed))
    assert eraser.run(erasure, 10, now + 2) == "done"
    done = http.get(f"/erasures/{erasure}", headers=ROOT).get_json()
    assert done["state"] == "done" and "url" not in done
    assert done["lakes"][0] == {"path": "/data/lake", "state": "erased", **removed}


def test_a_client_has_at_most_ten_erasures_running(
    http: FlaskClient, topics, redis_client: redis.Redis, settings: Settings
):
    """Each costs passes over every queue: the eleventh is a 429 with Retry-After and
    nothing recorded; once one is done, the client may ask again. Root is held to the
    bus's own bound only."""
    pub, _ = topics
    asked = [http.post("/erasures", json={"key": f"k{i}"}, headers=pub) for i in range(10)]
    assert [r.status_code for r in asked] == [202] * 10
    refused = http.post("/erasures", json={"key": "k10"}, headers=pub)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "10"
    assert "10 erasures running" in refused.get_json()["error"]
    assert redis_client.zcard(Keys().catalog.erasures) == 10
    assert http.post("/erasures", json={"key": "k10"}, headers=ROOT).status_code == 202
    keys = keys_for(settings)
    first = asked[0].get_json()["id"]
    assert Eraser(redis_client, keys, Scripts(redis_client)).run(first, 10, 1) == "done"
    assert http.post("/erasures", json={"key": "k11"}, headers=pub).status_code == 202
    running = {i.decode() for i in redis_client.smembers(keys.catalog.erasures_running)}
    assert first not in running and len(running) == 11

"""GET /subscriptions' queue figures as subscriber_listing.lua reads them, one script call
for many subscribers of a shard, checked against a count made the long way (every lane
list of every partition, every batch's length and header) on a real server: ordering
keys over partitions, a change of concurrency still draining, priorities, dead letters;
and a lane list longer than the walk, whose events are estimated and say so."""

from __future__ import annotations

import redis
from flask.testing import FlaskClient

from app.lua import Scripts
from app.models import partitions
from app.models import subscriber_calls as calls
from app.models.keys import BATCH_HEADER, LANES, Keys
from app.models.subscribers import SubscriberStore
from spec.app.web.conftest import ROOT, basic, make_client, subscribe

CREATED = BATCH_HEADER.index("created_at")


def counted(client: redis.Redis, keys: Keys, token: str) -> dict[int, tuple[int, int, int]]:
    """Lane -> (batches, events, oldest), the long way round: what the listing replaced."""
    found: dict[int, tuple[int, int, int]] = {}
    for pid in partitions.pids(client, keys, token):
        for lane in LANES:
            for batch_id in client.lrange(keys.lane(pid, lane), 0, -1):
                batch = keys.batch(token, batch_id.decode())
                events = client.llen(batch) - len(BATCH_HEADER)
                created = int(client.lindex(batch, CREATED))
                n, total, oldest = found.get(lane, (0, 0, created))
                found[lane] = (n + 1, total + events, min(oldest, created))
    return found


def listed(http: FlaskClient, name: str) -> dict:
    return next(s for s in http.get("/subscriptions", headers=ROOT).get_json() if s["name"] == name)


def test_keys_over_partitions_and_a_draining_change_are_counted_as_the_long_way(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    pub, sub = make_client(http, "pub"), make_client(http, "sub")
    routes = [{"topic": "orders", "priority": 2, "types": ["delete"]}, {"topic": "orders"}]
    subscribe(http, sub, routes, max=3, concurrency=4)
    events = [
        {"type": "delete" if i % 5 == 0 else "create", "url": f"https://o.test/{i}",
         "key": f"k{i % 9}"}
        for i in range(60)
    ]  # fmt: skip
    assert http.post("/topics/orders", json=events[:40], headers=pub).status_code == 204
    subscribe(http, sub, routes, max=3, concurrency=2)  # the old layout drains
    assert http.post("/topics/orders", json=events[40:], headers=pub).status_code == 204

    entry = listed(http, "sub")
    assert entry["draining"] == 4 and entry["events"]["queued"] == 60
    expected = counted(redis_client, keys, "sub")
    assert set(expected) == {2, 10} and sum(e for _, e, _ in expected.values()) == 60
    assert entry["lanes"] == [
        {"lane": lane, "batches": n, "events": e, "oldest": oldest}
        for lane, (n, e, oldest) in sorted(expected.items())
    ]
    assert entry["events"]["oldest"] == min(o for _, _, o in expected.values())
    assert (entry["in_flight"], entry["deadletters"]) == (0, 0)

    # five batches read of the subscriber's 29: every one counted, every oldest exact,
    # the events estimated at the mean of the five read (1 to 3 a batch: max 3)
    (short,) = Scripts(redis_client).run(calls.listing(keys.home("sub"), ["sub"], 5, 20_000))
    assert short is not None and short.oldest == entry["events"]["oldest"]
    assert [(f.lane, f.batches, f.oldest) for f in short.lanes] == [
        (lane, n, oldest) for lane, (n, _, oldest) in sorted(expected.items())
    ]
    assert all(f.estimated for f in short.lanes)
    batches = sum(n for n, _, _ in expected.values())
    assert batches == 29 and batches <= sum(f.events for f in short.lanes) <= 3 * batches


def test_a_lane_longer_than_the_walk_counts_its_batches_and_estimates_its_events(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    pub, sub = make_client(http, "pub"), make_client(http, "sub")
    subscribe(http, sub, ["orders"], max=2)
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(25)]
    assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
    scripts, home = Scripts(redis_client), keys.home("sub")

    (exact,) = scripts.run(calls.listing(home, ["sub"], 1000, 20_000))
    assert exact is not None and exact.queued == 25
    assert exact.lanes == (calls.LaneFigures(10, 13, 25, exact.oldest or 0, False),)

    (walked,) = scripts.run(calls.listing(home, ["sub"], 4, 20_000))  # 4 batches of 2, 9 more
    assert walked is not None
    assert walked.lanes == (calls.LaneFigures(10, 13, 26, exact.oldest or 0, True),)
    assert walked.queued == 25  # the subscriber's own count stays exact


def test_a_subscriber_gone_between_the_two_reads_is_left_out_and_names_come_along(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    names = [f"c{i:02}" for i in range(30)]  # past NAMES_ONE_BY_ONE: the names as one hash
    for name in names:
        subscribe(http, make_client(http, name), ["orders"])
    redis_client.delete(keys.subscriber("c07"))  # as a deletion under way leaves it
    every = http.get("/subscriptions", headers=ROOT).get_json()
    assert sorted(s["name"] for s in every) == [n for n in names if n != "c07"]
    assert all(s["subscriber"] == s["name"] for s in every)
    assert http.get("/subscriptions", headers=make_client(http, "solo")).get_json() == []


def next_link(response) -> str | None:
    link = response.headers.get("Link")
    if link is None:
        return None
    assert link.startswith("</subscriptions?") and link.endswith('>; rel="next"')
    return link[1 : link.index(">")]


def test_pages_walk_every_subscriber_once_in_name_order_and_survive_a_deletion(
    http: FlaskClient,
):
    names = ["delta", "alpha", "echo", "bravo", "golf", "charlie", "foxtrot"]
    for i, name in enumerate(names):
        body = {"name": name, "token": f"{name}-token-{i}"}
        assert http.post("/api_tokens", json=body, headers=ROOT).status_code == 201
        subscribe(http, basic(body["token"]), ["orders"])
    every = http.get("/subscriptions", headers=ROOT)
    assert every.headers.get("Link") is None
    assert [s["name"] for s in every.get_json()] == sorted(names)

    seen, path, pages = [], "/subscriptions?limit=3", 0
    while path:
        response = http.get(path, headers=ROOT)
        assert response.status_code == 200
        seen += [s["name"] for s in response.get_json()]
        path, pages = next_link(response), pages + 1
        tokens = [f"{n}-token-{i}" for i, n in enumerate(names)]
        assert not [t for t in tokens if path and (t in path or t.encode().hex() in path)]
        if pages == 1:  # the last of the first page goes: the next starts after its place
            assert http.delete("/api_tokens/charlie-token-5", headers=ROOT).status_code == 204
    assert seen == sorted(names) and pages == 3

    (only,) = http.get("/subscriptions?limit=1", headers=basic("echo-token-2")).get_json()
    assert only["name"] == "echo"


def test_a_malformed_page_is_a_400_naming_it(http: FlaskClient):
    for query, named in (
        ("limit=0", "limit must be an integer from 1 to 1000"),
        ("limit=1001", "limit must be"),
        ("limit=%C2%B2", "limit must be"),
        ("after=not-a-cursor", "after must be a cursor"),
        ("after=%FF%FE", "after must be a cursor"),
        ("after=6162.0123", "after must be a cursor"),
        ("after=616.0123456789abcdef", "after must be a cursor"),
        ("limt=3", "unknown parameter 'limt'"),
    ):
        response = http.get(f"/subscriptions?{query}", headers=ROOT)
        assert response.status_code == 400 and named in response.get_json()["error"], query


def test_a_call_stops_past_its_budget_and_the_rest_is_asked_for_again(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    pub = make_client(http, "pub")
    names = [f"s{i}" for i in range(6)]
    for i, name in enumerate(names):
        subscribe(http, make_client(http, name), ["orders"], max=2, concurrency=1 + i % 3)
    events = [{"type": "create", "url": f"https://o.test/{i}", "key": f"k{i}"} for i in range(9)]
    assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
    shards = [keys.shard_of(n) for n in names]
    most = max(set(shards), key=shards.count)  # six over four shards: two share one
    same_shard = [n for n, shard in zip(names, shards, strict=True) if shard == most]
    assert len(same_shard) >= 2
    one = Scripts(redis_client).run(calls.listing(keys.shard(most), same_shard, 500, 1))
    assert len(one) == 1 and one[0] is not None and one[0].queued == 9  # the first only
    store = SubscriberStore(redis_client, keys, Scripts(redis_client))
    assert store.describe(names, budget=1) == store.describe(names)
    assert [i.queued for i in store.describe(names, budget=1)] == [9] * 6

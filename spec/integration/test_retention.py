"""Payload retention from outside (docs/erasure.md, Retention): real web and worker
processes (Expire every second), real subscribers, on one Redis and on a cluster. A
topic with a retention of 3 s and one without: once it has run out, the first topic's
dead letters are gone and the second's stay; the delivery log, the attempt stream and
the attempt logs hold nothing older than the shortest retention in force, whichever
topic it was about; queued events (on their way, not kept) stay."""

from __future__ import annotations

import time
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving


def test_a_topics_retention_removes_its_payloads_and_no_others(redis_url: str, tmp_path: Path):
    dead = Subscriber(responder=lambda _: (500, 0.0))
    with serving() as ok, serving(dead), bus(redis_url, tmp_path, BUSBAR_EXPIRE_INTERVAL="1") as b:
        for name in ("pub", "ok", "dead", "held"):
            b.client(name)
        b.subscribe("ok", ok.url, ["brief", "kept"], max=1, timeout=0)
        b.subscribe("dead", dead.url, ["brief", "kept"], max=1, timeout=0, max_attempts=1)
        b.subscribe("held", ok.url, ["brief"], max=1, timeout=0)
        assert b.call("POST", "/subscriber/pause", "held").status_code == 200
        for topic in ("brief", "kept"):
            b.publish("pub", topic, [{"type": "create", "url": f"https://o.test/{topic}/{i}"}
                                     for i in range(3)])  # fmt: skip
        ok.wait_for(6, 30)
        client, keys = b.redis(), b.keys

        def dead_letters() -> dict[str, int]:
            listed = b.call("GET", "/subscribers/dead/deadletters", ROOT_KEY).json()
            return {t: sum(1 for d in listed if f"/{t}/" in d["url"])
                    for t in ("brief", "kept")}  # fmt: skip

        wait_until(lambda: dead_letters() == {"brief": 3, "kept": 3}, 30, "the dead letters")
        streams = [s for shard in keys.all_shards() for s in (shard.delivery_log,
                                                               shard.attempt_stream)]  # fmt: skip
        assert sum(client.xlen(s) for s in streams) > 0
        put = b.call("PUT", "/topics/brief/retention", "pub", {"retention_s": 3})
        assert put.status_code == 200, put.text
        # they failed more than 3 s ago: they go at the next Expire
        wait_until(lambda: dead_letters() == {"brief": 0, "kept": 3}, 30, "brief's to go")
        # one Expire trims the shards' logs, then each subscriber's attempt log: a look
        # between the two (a cluster's pipeline takes a while) saw the latter still there
        wait_until(lambda: sum(client.xlen(s) for s in streams) == 0
                   and all(client.xlen(keys.attempts(t)) == 0 for t in ("ok", "dead")),
                   10, "the logs and the subscribers' attempt logs to go")  # fmt: skip
        # a newer delivery (of the topic without a retention) stays its 3 s, then goes
        b.publish("pub", "kept", {"type": "create", "url": "https://o.test/kept/new"})
        ok.wait_for(7, 30)
        wait_until(lambda: sum(client.xlen(s) for s in streams) > 0, 10, "the new entries")
        newest = max(int(entries[0][0].split(b"-")[0]) for s in streams
                     if (entries := client.xrevrange(s, count=1)))  # fmt: skip
        wait_until(lambda: sum(client.xlen(s) for s in streams) == 0, 15, "the new entries to go")
        assert time.time() * 1000 - newest >= 2_900  # kept its 3 s (entry ids: Redis's clock)
        assert b.subscription("held")["events"]["queued"] == 3
        assert int(client.hget(keys.subscriber("dead"), "deadletters_retired")) == 3

"""Events up to BUSBAR_MAX_EVENT_DATA (256 KiB by default) on a real server: every script
that was bounded by a count of events is bounded in bytes too, so large events keep
each script short (docs/semantics.md, Bounded scripts), and a batch a worker POSTs stays
about BATCH_BYTES, not `max` x 256 KiB. Each of these ran as one long script before."""

from __future__ import annotations

import redis

from app import codec
from app.lua import Scripts
from app.models.deadletters import DeadLetters
from app.models.event import Event
from app.models.keys import BATCH_BYTES, SCRIPT_BYTES, Keys
from app.models.shed_calls import expire
from app.models.subscriber_calls import deadletters_replay
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from app.services.shedding import Shedding
from config.settings import Settings
from spec.app.services.test_ingest import NOW, batch_contents

KIB = 1024


def large(n: int, size: int, start: int = 0) -> list[Event]:
    """n events whose data is about `size` bytes of msgpack."""
    return [
        Event("create", f"https://o.test/{i}", NOW + i, {"p": "x" * size})
        for i in range(start, start + n)
    ]


def setup(redis_client: redis.Redis, keys: Keys, scripts: Scripts, subscribers: list[str],
          **extra: object) -> Ingest:  # fmt: skip
    TokenStore(redis_client, keys).create("pub", "pub")
    store = SubscriberStore(redis_client, keys, scripts)
    for token in subscribers:
        body = {"topics": ["orders"], "callback": "https://s.test/in", "max": 100, **extra}
        store.subscribe(token, parse_subscription(body, allow_http=False), NOW)
    return Ingest(redis_client, keys, scripts, Settings())


def evalsha_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_batch_closes_at_batch_bytes_before_max(redis_client, keys, scripts):
    """`max` 100, events of 300 KiB: a batch holds 4 (the one that reaches 1 MiB closes
    it), not 100 (30 MiB, which a delivery, its ack and the delivery log would each copy
    in one script). Small events still fill batches to `max`."""
    ingest = setup(redis_client, keys, scripts, ["sub"], timeout=60_000)
    ingest.publish("orders", "pub", large(10, 300 * KIB), NOW)
    sizes = [len(b) for b in batch_contents(redis_client, keys, "sub", 10)]
    assert sizes == [4, 4, 2]
    assert BATCH_BYTES == 1024 * KIB
    # the open batch's bytes are kept while it takes events, and go with it
    (open_id,) = redis_client.hkeys(keys.filled("sub"))
    assert int(redis_client.hget(keys.filled("sub"), open_id)) > 600 * KIB
    ingest.publish("orders", "pub", large(150, 10, start=10), NOW)
    sizes = [len(b) for b in batch_contents(redis_client, keys, "sub", 10)]
    assert sizes == [4, 4, 100, 52]  # the third took small events up to `max`
    SubscriberStore(redis_client, keys, scripts).delete("sub")
    assert not redis_client.exists(keys.filled("sub"))


def test_a_fan_out_of_large_events_is_queued_in_several_scripts(redis_client, keys, scripts):
    """3 events of 300 KiB to 12 subscribers: 36 appends, far within the 3,000 a script
    may make, but 10.5 MiB: about SCRIPT_BYTES (4 MiB) a script, so at least 3 scripts.
    Before, one script wrote it all (3 events to 1,000 subscribers took Redis 2.3 s)."""
    tokens = [f"s{i}" for i in range(12)]
    ingest = setup(redis_client, keys, scripts, tokens, timeout=60_000)
    before = evalsha_calls(redis_client)
    assert ingest.publish("orders", "pub", large(3, 300 * KIB), NOW).pairs == 36
    assert evalsha_calls(redis_client) - before >= 3
    for token in tokens:
        assert batch_contents(redis_client, keys, token, 10) == [
            [f"https://o.test/{i}" for i in range(3)]
        ]


def test_an_expire_step_reads_about_script_bytes(redis_client, keys, scripts):
    """20 expired events of 300 KiB (6 MiB): one step removes what about 4 MiB holds and
    says where to go on; Expire's loop removes the rest."""
    ingest = setup(redis_client, keys, scripts, ["sub"], timeout=60_000)
    store = SubscriberStore(redis_client, keys, scripts)
    body = {"topics": [{"topic": "orders", "ttl": 1}], "callback": "https://s.test/in",
            "max": 100, "timeout": 60_000}  # fmt: skip
    store.subscribe("sub", parse_subscription(body, allow_http=False), NOW)
    ingest.publish("orders", "pub", large(20, 300 * KIB), NOW)
    later = NOW + 5_000
    step = scripts.run(expire(keys, "sub", "sub", later, False, 10_000, 0, 0))
    assert 0 < step.removed < 20 and step.lane is not None
    assert step.removed * 300 * KIB <= SCRIPT_BYTES + 1024 * KIB  # about a batch over
    shedding = Shedding(redis_client, keys, scripts, Settings())
    assert shedding.expire(later) == 20 - step.removed
    assert batch_contents(redis_client, keys, "sub", 10) == []


def test_a_dead_letter_replay_step_takes_about_script_bytes(redis_client, keys, scripts):
    """20 dead letters of 300 KiB: a step requeues what about 4 MiB holds (not its
    budget of 2,000: 600 MiB at 300 KiB); the replay goes on until all are back, in
    order."""
    setup(redis_client, keys, scripts, ["sub"], timeout=60_000)
    for event in large(20, 300 * KIB):
        packed = codec.pack_event("orders", event.type, event.url, event.t, event.data)
        redis_client.rpush(keys.deadletters("sub"), b"1|%d|10|500|0|" % NOW + packed)
    step = scripts.run(deadletters_replay(keys, "sub", NOW, 2_000))
    assert step is not None and 0 < step.events < 20 and step.left == 20 - step.events
    assert step.events * 300 * KIB <= SCRIPT_BYTES + 300 * KIB
    assert DeadLetters(redis_client, keys, scripts).replay("sub", NOW) == 20 - step.events
    urls = [u for b in batch_contents(redis_client, keys, "sub", 10) for u in b]
    assert urls == [f"https://o.test/{i}" for i in range(20)]

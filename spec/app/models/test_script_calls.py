"""Each builder of app/models/subscriber_calls.py, publish_calls.py, shed_calls.py (and
job_calls.py's liveness calls) fills exactly the KEYS and ARGV its script's header
names, each in the place the header gives it; every script in app/lua has a builder and
is called through it (Scripts has no other way in); and replies are read into the named
types callers use. The scripts' behaviour is tested where each is used."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from app.codec import EVENT_TYPES
from app.errors import Conflict, NotFound
from app.lua import Scripts
from app.models import job_calls, publish_calls, schema_calls, shed_calls, token_calls
from app.models import subscriber_calls as calls
from app.models.keys import MAIN, Keys
from app.models.publish_calls import Published, Replayed
from app.models.subscriber_calls import TopicDeleted
from spec.app.delivery.test_calls import declared, place
from spec.app.models.test_job_calls import declared_key

KEYS = Keys("busbar:", 4)
HOME = KEYS.home("tok")
ROOT = Path(__file__).resolve().parents[3]


def fits(call: object, extra_args: int = 0, extra_keys: int = 0) -> tuple[int, dict[int, str]]:
    """Asserts the call has the header's fixed KEYS and ARGV (and `extra` variable ones);
    returns the header's ARGV descriptions."""
    top_key, argv = declared(call.script)  # type: ignore[attr-defined]
    assert len(call.keys) == top_key + extra_keys  # type: ignore[attr-defined]
    assert len(call.args) == max(argv) + extra_args  # type: ignore[attr-defined]
    return argv


def test_every_script_has_a_builder_and_nothing_calls_a_script_by_name():
    """Call("<script>", ...) in app/ names every script once; no module reaches a
    script as an attribute of a registry (the way in before builders)."""
    sources = "\n".join(p.read_text() for p in (ROOT / "app").rglob("*.py"))
    built = set(re.findall(r'Call\(\s*"([a-z_]+)"', sources))
    scripts = {p.stem for p in (ROOT / "app" / "lua").glob("*.lua")}
    assert built == scripts
    for tree in ("app", "workers", "jobs", "spark", "bench", "dev"):
        for path in (ROOT / tree).rglob("*.py"):
            found = re.findall(rf"scripts\.({'|'.join(sorted(scripts))})\b", path.read_text())
            assert not found, f"{path}: calls {found} outside a builder"


def test_subscribe_names_settings_layout_and_two_values_a_topic():
    fields = calls.ShardFields(
        "https://s.test/",
        "UUID",
        True,
        500,
        10,
        3,
        b"JOB",
        "Name",
        True,
        "SALT",
        "[HEADERS]",
        "{AUTH}",
        "{CERT}",
        '{"orders": []}',
        "{DESTINATION}",
    )
    call = calls.subscribe(
        KEYS, "tok", fields, 123, 4, [b"J0", b"J1"], [("orders", "[]"), ("users", "[{}]")]
    )
    # the jobs, the transforms, the destination, two topics
    argv = fits(call, extra_args=2 + 1 + 1 + 4)
    assert call.keys == [KEYS.subscriber("tok"), KEYS.routes("tok")]
    assert (
        argv[place(call, "https://s.test/")] == "callback" and argv[place(call, "UUID")] == "uuid"
    )
    assert "timeout" in argv[place(call, 500)] and "max_events" in argv[place(call, 10)]
    assert "max_attempts" in argv[place(call, 3)] and "job" in argv[place(call, b"JOB")]
    assert "now" in argv[place(call, 123)] and "name" in argv[place(call, "Name")]
    assert "salt" in argv[place(call, "SALT")] and "token" in argv[place(call, "tok")]
    assert "key base" in argv[place(call, HOME.base)] and "concurrency" in argv[place(call, 4)]
    assert "headers" in argv[place(call, "[HEADERS]")] and "auth" in argv[place(call, "{AUTH}")]
    assert call.args[2] == "1" and call.args[9] == "1"  # uuid given, event ids
    assert "client certificate" in argv[place(call, "{CERT}")]
    assert call.args[17:] == [
        2, b"J0", b"J1", '{"orders": []}', "{DESTINATION}", "orders", "[]", "users", "[{}]"
    ]  # fmt: skip
    assert "destination" in declared_argv_line("subscribe", "ARGV[20+m]")
    assert "topics" in declared_argv_line("subscribe", "ARGV[21+m..]")


def test_the_subscription_catalog_steps():
    route = calls.subscribe_route(KEYS, "tok", [("orders", b"TABLE", '[{"type": "create"}]')])
    argv = fits(route, extra_args=3)
    assert "key base" in argv[place(route, KEYS.catalog.base)] and "shard" in argv[3]
    assert route.args[3:] == ["orders", b"TABLE", '[{"type": "create"}]']
    assert route.keys == [KEYS.subscribers, KEYS.topics]
    assert "three values each" in declared_argv_line("subscribe_route", "ARGV[4..]")
    off = calls.unsubscribe_topic(KEYS, "tok", "orders")
    argv = fits(off)
    assert off.keys[1] == KEYS.topic_subscribers("orders") and argv[place(off, "orders")] == "topic"
    assert "key base" in argv[place(off, KEYS.catalog.base)]
    gone = calls.unroute(KEYS, "tok", True, "added")
    argv = fits(gone)
    assert gone.keys == [KEYS.tokens, KEYS.subscribers, KEYS.aliases, KEYS.names]
    assert "forget the client" in argv[3] and "token being deleted" in argv[place(gone, "added")]
    assert gone.args == [KEYS.catalog.base, "tok", "1", "added"]
    assert gone.read(2) is calls.Unrouted.TOKEN_ONLY and not gone.read(0)


def test_delete_purge_and_their_replies():
    call = calls.delete(KEYS, "tok", 10)
    argv = fits(call)
    assert call.keys[8] == HOME.trash and "trash set" in declared_key("subscriber_delete", 9)
    assert "lowest lane" in argv[place(call, 10)]
    assert call.read([1, 7, b"tok/0/3"]) == calls.Deleted(True, 7, ["tok/0/3"])
    purge = calls.purge(KEYS, HOME, "tok/2/3", 50)
    argv = fits(purge)
    assert purge.keys[1:] == [KEYS.trash_lane("tok", 2, 3), HOME.batch_index(3)]
    assert "most batches" in argv[place(purge, 50)] and "trash member" in argv[2]


def test_pause_secret_and_topic_delete_read_what_they_answer():
    pause = calls.pause(KEYS, "tok", 5, False, "root", None)
    argv = fits(pause)
    assert pause.keys[1:] == HOME.job_states(MAIN)
    assert (
        "'pause' or 'resume'" in argv[place(pause, "pause")] and "who" in argv[place(pause, "root")]
    )
    assert pause.args[-1] == "" and calls.pause(KEYS, "tok", 5, True, "r", 9).args[3:] == [
        "resume",
        "r",
        9,
    ]
    assert pause.read([]) is None and pause.read([b"5", b"root"]) == calls.Paused("5", "root")
    secret = calls.secret(KEYS, "tok", True, "SALT", 5, 1000)
    argv = fits(secret)
    assert "grace" in argv[place(secret, 1000)] and secret.args[0] == "rotate"
    assert secret.read([b"s", 0]) == calls.Salted("s", None) and secret.read([]) is None
    topic = calls.topic_delete(KEYS, "orders", None)
    argv = fits(topic)
    assert topic.args == ["orders", ""] and "caller" in argv[2]
    assert [topic.read(n) for n in (1, 0, -1)] == list(TopicDeleted)


def test_dead_letters_replay_names_the_list_and_reads_a_missing_subscriber():
    call = calls.deadletters_replay(KEYS, "tok", 9, 100)
    argv = fits(call)
    assert call.keys[1] == KEYS.deadletters("tok") and "budget" in argv[place(call, 100)]
    assert call.read([-1, 0]) is None and call.read([3, 4]) == calls.Requeued(3, 4)


def test_the_listing_names_its_shard_and_reads_each_subscriber_or_none():
    call = calls.listing(HOME, ["tok", "tak"], 1000, 20_000)
    argv = fits(call, extra_args=2)
    assert call.keys == [HOME.event_gauge] and call.args[:3] == [HOME.base, 1000, 20_000]
    assert "walked" in argv[place(call, 1000)] and "stops" in argv[place(call, 20_000)]
    row = [[b"max_events", b"1"], [b"t", b"[]"], 3, 1, 0, 7, [2, 1, 3, 7, 0, 10, 4, 9, 8, 1]]
    listed, gone = call.read([row, []])
    assert gone is None and listed == calls.Listed(
        {b"max_events": b"1"}, {b"t": b"[]"}, 3, 1, 0, 7,
        (calls.LaneFigures(2, 1, 3, 7, False), calls.LaneFigures(10, 4, 9, 8, True)),
    )  # fmt: skip
    assert call.read([[[], [], 0, 0, 0, 0, []]]) == [calls.Listed({}, {}, 0, 0, 0, None, ())]


def test_publish_and_its_shard_step():
    p = publish_calls.Publish(
        "orders", "pub", 7, 60_000, "PID", 30, ["t", "u", "", b"E", " t=1"], 41
    )
    call = publish_calls.publish(KEYS, p, 3000, "FP", 50, 100)
    argv = fits(call, extra_args=5)
    assert "filters version" in argv[place(call, 41)] and call.args[12:] == p.packed
    assert "five values each" in declared_argv_line("publish", "ARGV[13..]")
    changed = call.read([-5, 44])
    assert (changed.status, changed.queued) == (Published.FILTERS_CHANGED, 44)
    assert call.keys[5:] == [KEYS.catalog.published("PID"), KEYS.catalog.rate("pub"), KEYS.aliases]
    assert "added token" in declared_key("publish", 8)
    assert "budget" in argv[place(call, 3000)] and "fingerprint" in argv[place(call, "FP")]
    assert "rate" in argv[place(call, 50)] and "size" in argv[place(call, 100)]
    assert "default ttl" in argv[place(call, 60_000)] and "remembered" in argv[place(call, 30)]
    step = call.read([-4, 1500])
    assert (step.status, step.queued) == (Published.RATE_LIMITED, 1500)
    assert call.read([1, 2, b"tok", b"1|T"]).left == [("tok", b"1|T")]
    shard = KEYS.shard(1)
    queue = publish_calls.publish_queue(shard, p, [("tok", b"1|T"), ("two", b"1|U")])
    argv = fits(queue, extra_args=4 + 5)
    assert queue.keys[-1] == shard.published("PID:tok") and argv[6] == "n"  # the subscribers named
    assert queue.args[6:10] == ["tok", b"1|T", "two", b"1|U"] and queue.args[10:] == p.packed
    assert queue.read(-1) == 0 and queue.read(3) == 3


def test_topic_filters_reads_the_version_each_list_and_each_schema():
    call = publish_calls.topic_filters(KEYS, "orders", 7)
    argv = fits(call, extra_args=len(EVENT_TYPES))
    assert call.keys == [
        KEYS.topic("orders"), KEYS.topic_filters("orders"), KEYS.topic_schemas("orders")
    ]  # fmt: skip
    assert "the version the caller holds" in argv[1] and call.args == [7, *EVENT_TYPES]
    assert call.read([7]) == (7, None, ())  # held: nothing sent
    read = call.read([9, [b"tok", b"[{}]"], [b"create", b"2", b"5|0|{}"]])
    assert read == (9, {"tok": b"[{}]"}, (("create", 2, b"5|0|{}"),))
    assert publish_calls.topic_filters(KEYS, "orders", None).read([0, [], []]) == (0, {}, ())


def declared_argv_line(script: str, slot: str) -> str:
    text = (ROOT / "app" / "lua" / f"{script}.lua").read_text()
    return next(line for line in text.splitlines() if line.startswith(f"-- {slot}"))


def test_replay_queue_names_its_position_and_reads_each_refusal():
    rows = publish_calls.ReplayRows("R1", 40, 12, 10, 0, [b"E1", b"E2"])
    call = publish_calls.replay_queue(KEYS, "tok", 9, rows)
    argv = fits(call, extra_args=2)
    assert call.keys[7] == HOME.replay("R1") and "id" in argv[place(call, "R1")]
    assert "position" in argv[place(call, 40)] and "consumes" in argv[place(call, 12)]
    assert argv[place(call, 10)] == "lane" and call.args[8:] == [b"E1", b"E2"]
    assert call.read([-2, 52]).status is Replayed.MOVED_ON
    assert call.read([2, 52]) == (Replayed.QUEUED, 2, 52)


def test_the_shedding_calls():
    step = shed_calls.expire(KEYS, "tok", "tok:p1", 9, True, 500, 3, 40)
    argv = fits(step)
    assert "pid" in argv[place(step, "tok:p1")] and "budget" in argv[place(step, 500)]
    assert step.args[3] == "1" and step.args[5:] == [3, 40]
    assert step.read([4, -1, 0]) == (4, None, 0)
    drop = shed_calls.batch_drop(HOME, 7, 20)
    argv = fits(drop)
    assert drop.keys[3] == HOME.batch_index(7) and argv[place(drop, 7)] == "lane"
    shed = shed_calls.subscriber_shed(KEYS, HOME, "tok", 1000, 50)
    argv = fits(shed)
    assert "floor" in argv[place(shed, 1000)] and "most batches" in argv[place(shed, 50)]
    assert shed.read([1, 2, 3]) == shed_calls.Shed(1, 2, 3)


def test_the_liveness_calls():
    beat = job_calls.heartbeat(HOME, "w.1.x")
    assert fits(beat)[1] == "the process's identifier" and beat.keys == [HOME.workers]
    forget = job_calls.forget_worker(HOME, "w.1.x", 9000)
    assert "silence" in fits(forget)[place(forget, 9000)]
    assert forget.read(0) is False


def test_a_reply_read_on_the_real_server(redis_client: redis.Redis, scripts: Scripts):
    keys = Keys("script-calls:", 1)
    assert scripts.run(calls.topic_delete(keys, "nothing", None)) is TopicDeleted.MISSING
    assert scripts.run(calls.pause(keys, "nobody", 1, False, "root", None)) is None
    assert scripts.run(job_calls.forget_worker(keys.catalog, "w.9.x", 0)) is False


def test_the_schema_scripts_take_what_their_headers_say_and_read_each_answer(
    redis_client: redis.Redis, scripts: Scripts
):
    keys = Keys("schema-calls:", 1)
    put = schema_calls.schema_put(keys, "orders", "tok", "create", "{}", 5)
    argv = fits(put)
    assert put.keys == [keys.topics, keys.topic("orders"), keys.topic_schemas("orders")]
    assert "caller token" in argv[2] and "versions kept" in argv[6]
    assert put.args[6] == keys.catalog.base
    gone = schema_calls.schema_delete(keys, "orders", "tok", "create")
    assert "event type" in fits(gone)[3] and gone.args[4] == keys.catalog.base
    marked = schema_calls.schema_deprecate(keys, "orders", "", "create", 1, True)
    assert "version" in fits(marked)[3] and marked.args == ["", "create", 1, "1"]

    done = schema_calls.Changed.DONE
    assert scripts.run(put) == (done, 1)
    assert scripts.run(put) == (schema_calls.Changed.SAME, 1)  # the same schema again
    other = schema_calls.schema_put(keys, "orders", "other", "create", "{}", 5)
    assert scripts.run(other) == (schema_calls.Changed.NOT_YOURS, 0)
    assert scripts.run(marked) is done
    assert scripts.run(gone) is done
    assert scripts.run(gone) is schema_calls.Changed.SAME  # nothing there any more


def test_the_hash_swap_and_the_push_keys_calls():
    from app.models import push_keys

    swap = calls.swap(KEYS.subscriber("tok"), "headers", "READ", "NEW")
    argv = fits(swap)
    assert swap.keys == [KEYS.subscriber("tok")]
    assert "field" in argv[place(swap, "headers")] and "as read" in argv[place(swap, "READ")]
    assert "new value" in argv[place(swap, "NEW")]
    keys = push_keys.call(KEYS, True, "KID", "ENTRY", 100, 60)
    argv = fits(keys)
    assert keys.keys == [KEYS.push_keys] and keys.args[0] == "rotate"
    assert "kid" in argv[place(keys, "KID")] and "entry" in argv[place(keys, "ENTRY")]
    assert "now" in argv[place(keys, 100)] and "published" in argv[place(keys, 160)]
    assert push_keys.call(KEYS, False, "K", "E", 1, 0).args[0] == "current"
    assert keys.read([b"kid", b"{}"]) == ("kid", "{}")


def test_the_token_calls_name_their_keys_and_read_each_refusal():
    create = token_calls.create(KEYS, "shop", "tok", True, False)
    argv = fits(create)
    assert create.keys == [KEYS.tokens, KEYS.aliases, KEYS.names, KEYS.operators]
    assert "name" in argv[place(create, "shop")] and argv[place(create, "tok")] == "the token"
    assert create.args[2:] == ["1", "0"] and "add the token" in argv[3]
    assert "mark" in argv[4] and token_calls.create(KEYS, "a", "b", False, None).args[3] == ""
    assert create.read([1, b"key", 1]) == token_calls.Created("key", True)
    refusals = {
        -1: "token already belongs to another client",
        -2: "a client named shop exists: names are one client's; to give it another token, "
        'post {"name": ..., "add": true}',
        -3: "that token was deleted from its client",
        -4: "no client named shop to add a token to",
    }
    for status, message in refusals.items():
        with pytest.raises((Conflict, NotFound), match=re.escape(message)):
            create.read([status])
    with pytest.raises(Conflict, match="2 clients are named shop, made before"):
        create.read([-5, 2])
    rename = token_calls.rename(KEYS, "key", "new")
    argv = fits(rename)
    assert rename.keys == [KEYS.tokens, KEYS.names] and "key" in argv[1] and "new name" in argv[2]
    assert rename.read([1, b"old"]) == token_calls.Renamed("old", True)
    assert rename.read([0, b"new"]) == token_calls.Renamed("new", False)
    with pytest.raises(NotFound):
        rename.read([-1])
    with pytest.raises(Conflict, match="another client is named new"):
        rename.read([-2])


def test_the_layout_calls_name_the_catalogs_meta():
    from app.models import layout

    stamp = layout.stamp(KEYS, 3)
    argv = fits(stamp)
    assert stamp.keys == [KEYS.meta, KEYS.tokens, KEYS.topics]
    assert "new store" in argv[place(stamp, 3)]
    advance = layout.advance(KEYS, 1, 2)
    argv = fits(advance)
    assert advance.keys == [KEYS.meta]
    assert "began" in argv[1] and "leaves" in argv[2] and advance.read(b"2") == 2

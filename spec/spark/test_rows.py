"""Log entries into lake rows without a JVM: each row's event id is the one a
subscription with `event_ids` receives, the same for every subscriber of the event."""

from __future__ import annotations

from app import codec
from app.models import event_ids
from app.models.trace_context import TraceContext
from spark.rows import to_record_batch
from spark.selection import replay_rows


def logged(subscriber: str, entries: list[bytes], batch_id: int = 1) -> tuple[bytes, dict]:
    fields = {
        b"subscriber": subscriber.encode(), b"priority": b"3", b"batch_id": str(batch_id).encode(),
        b"created_at": b"1000", b"first_attempt_at": b"1100", b"delivered_at": b"1200",
        b"attempts": b"1", b"events": codec.pack_log_events(entries),
    }  # fmt: skip
    return f"1-{batch_id}".encode(), fields


def ids_of(*entries: tuple[bytes, dict]) -> list[str]:
    return to_record_batch(0, list(entries)).column("id").to_pylist()


def test_a_published_event_has_one_id_whichever_subscriber_it_reached():
    order = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, {"n": 1})
    other = b"0|" + codec.pack_event("orders", "create", "https://o.test/2", 5, {"n": 1})
    later = b"9|" + codec.pack_event("orders", "create", "https://o.test/1", 5, {"n": 1})
    found = ids_of(logged("a", [order, other]), logged("b", [later], 2))
    assert found[0] == found[2]  # another route's expiry, the same event
    assert found[0] != found[1]
    assert found[:2] == [event_ids.of_entry(e, codec.unpack_entry(e)) for e in (order, other)]


def test_an_event_published_with_a_publish_id_keeps_the_id_it_was_given():
    given = event_ids.for_publish("orders", "publish-7", 0)
    entry = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, None, None, given)
    assert ids_of(logged("a", [entry])) == ["evt_" + given]


def test_each_row_says_where_its_event_was_in_the_batch():
    events = [
        b"0|" + codec.pack_event("o", "create", f"https://o.test/{i}", 5, None) for i in range(3)
    ]
    table = to_record_batch(0, [logged("a", events), logged("a", events[:1], 2)])
    assert table.column("position").to_pylist() == [0, 1, 2, 0]


def test_an_event_with_a_trace_context_keeps_it_and_its_id():
    """The context kept with an event (docs/tracing.md) goes to the lake beside it, so a
    lake replay sends it on; the row is otherwise the one the event would have had
    without it, its id included."""
    trace = TraceContext(f"00-{'ab' * 16}-{'cd' * 8}-01", "rojo=1")
    plain = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, {"n": 1})
    traced = b"0|" + codec.pack_event(
        "orders", "create", "https://o.test/1", 5, {"n": 1}, None, None, trace
    )
    rows = to_record_batch(0, [logged("a", [plain]), logged("a", [traced], 2)]).to_pylist()
    assert (rows[0]["traceparent"], rows[0]["tracestate"]) == (None, None)
    assert (rows[1]["traceparent"], rows[1]["tracestate"]) == trace
    differ = ("batch_id", "stream_id", "traceparent", "tracestate")
    assert {k: v for k, v in rows[0].items() if k not in differ} == {
        k: v for k, v in rows[1].items() if k not in differ
    }


def test_a_replayed_row_is_queued_with_its_trace_context_and_key():
    trace = TraceContext(f"00-{'ab' * 16}-{'cd' * 8}-01", None)
    rows = [
        ("evt_a", "orders", "create", "https://o.test/1", 5, '{"n":1}', *trace, "order-9", 3),
        ("evt_b", "orders", "create", "https://o.test/2", 5, None, None, None, None, None),
    ]
    queued = [codec.unpack_entry(b"0|" + packed) for *_, packed in replay_rows(rows)]
    assert [(e.stored_id, e.trace, e.key, e.schema) for e in queued] == [
        ("a", trace, "order-9", 3), ("b", None, None, None),
    ]  # fmt: skip


def test_an_event_with_an_ordering_key_keeps_it_in_the_lake():
    """The key its publisher gave (docs/semantics.md, Ordering keys) goes to the lake,
    so a lake replay to a subscriber with `concurrency` keeps each key's order; an event
    without one has none (its key is its url)."""
    keyed = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, None, key="k1")
    plain = b"0|" + codec.pack_event("orders", "create", "https://o.test/2", 5, None)
    rows = to_record_batch(0, [logged("a", [keyed, plain])]).to_pylist()
    assert [r["key"] for r in rows] == ["k1", None]


def test_an_event_checked_against_a_schema_keeps_the_version_in_the_lake():
    """The version of its type's schema its data was checked against at publish; an
    event of a type with no schema has none."""
    checked = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, {"n": 1},
                                       key="k1", schema=4)  # fmt: skip
    plain = b"0|" + codec.pack_event("orders", "update", "https://o.test/2", 5, None)
    rows = to_record_batch(0, [logged("a", [checked, plain])]).to_pylist()
    assert [(r["key"], r["schema_version"]) for r in rows] == [("k1", 4), (None, None)]
    assert codec.unpack_entry(checked).schema == 4


def test_an_erased_event_gives_no_row_and_the_others_keep_their_places():
    """An erasure blanks each erased event of a logged batch ('', spark/erased.py): it
    never reaches the lake, and the rest are the rows they were, positions included."""
    events = [
        b"0|" + codec.pack_event("o", "create", f"https://o.test/{i}", 5, None) for i in range(4)
    ]
    whole = to_record_batch(0, [logged("a", events)]).to_pylist()
    blanked = [b"", events[1], b"", events[3]]
    rows = to_record_batch(0, [logged("a", blanked), logged("a", [b""], 2)]).to_pylist()
    assert rows == [whole[1], whole[3]]
    assert [r["position"] for r in rows] == [1, 3]


def shaped(i: int, sent: dict | None) -> tuple[bytes, bytes]:
    """An event as queued, and as a transform made it (app/delivery/shaping.py)."""
    queued = b"0|" + codec.pack_event("o", "create", f"https://o.test/{i}", 5, {"total": i})
    if sent is None:
        return queued, queued
    event = codec.unpack_entry(queued)
    given = event_ids.of_entry(queued, event).removeprefix("evt_")
    return queued, codec.reshaped_entry(queued, event, sent, given)


def test_a_transformed_event_keeps_what_was_sent_its_id_and_what_was_published():
    """`data` is what the subscriber received; `source_data` the data as published where
    a transform changed it (null where not); the id is the one the subscriber got."""
    pairs = [shaped(0, {"text": "Order 0"}), shaped(1, None), shaped(2, {"text": "Order 2"})]
    key, fields = logged("a", [sent for _, sent in pairs])
    fields[b"source"] = codec.pack_log_events([queued for queued, _ in pairs])
    rows = to_record_batch(0, [(key, fields), logged("b", [pairs[0][0]], 2)]).to_pylist()
    assert [r["data"] for r in rows] == [
        '{"text":"Order 0"}', '{"total":1}', '{"text":"Order 2"}', '{"total":0}',
    ]  # fmt: skip
    assert [r["source_data"] for r in rows] == ['{"total":0}', None, '{"total":2}', None]
    assert rows[0]["id"] == rows[3]["id"]  # one event, whichever shape it was sent in
    assert rows[0]["id"] == event_ids.of_entry(pairs[0][0], codec.unpack_entry(pairs[0][0]))

    fields[b"events"] = codec.pack_log_events([b"", pairs[1][1], pairs[2][1]])  # erased
    fields[b"source"] = codec.pack_log_events([b"", pairs[1][0], pairs[2][0]])
    rows = to_record_batch(0, [(key, fields)]).to_pylist()
    assert [(r["position"], r["source_data"]) for r in rows] == [(1, None), (2, '{"total":2}')]

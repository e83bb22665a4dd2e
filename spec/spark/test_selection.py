"""A replay's selection over the lake: time range, topics, type, subscriber, URL prefix;
an event delivered to several subscribers selected once; original order kept."""

from __future__ import annotations

import pytest

from spark.errors import SelectionError
from spark.selection import COLUMNS, Selection, instant, once_each, ordered, summary
from spec.spark.logdata import BASE_MS

DAY = 86_400_000
# (id, subscriber, topic, type, url, t, stream_id, position): e1 reached a and b
ROWS = [
    ("e1", "a", "orders", "create", "https://o.test/1", BASE_MS + 10, "1-1", 0),
    ("e2", "a", "orders", "create", "https://o.test/2", BASE_MS + 10, "1-1", 1),
    ("e1", "b", "orders", "create", "https://o.test/1", BASE_MS + 10, "1-7", 0),
    ("e3", "a", "users", "create", "https://u.test/3", BASE_MS + 5, "1-2", 0),
    ("e4", "b", "orders", "delete", "https://o.test/4", BASE_MS + 20, "1-3", 0),
    ("e5", "a", "orders", "create", "https://x.test/5", BASE_MS + DAY, "1-4", 0),
    ("e6", "a", "orders", "update", "https://p.test/6", BASE_MS + 40, "1-10", 0),
    ("e7", "a", "orders", "update", "https://p.test/7", BASE_MS + 40, "1-9", 0),  # before 1-10
]


@pytest.fixture
def lake_events(spark):
    names = ["id", "subscriber", "topic", "type", "url", "t", "stream_id", "position"]
    frame = spark.createDataFrame(ROWS, names)
    delivered = "timestamp_millis(t + 100) AS delivered_at"
    untraced = ("CAST(NULL AS STRING) AS traceparent", "CAST(NULL AS STRING) AS tracestate",
                "CAST(NULL AS STRING) AS key", "CAST(NULL AS INT) AS schema_version")  # fmt: skip
    return frame.selectExpr("*", "0 AS stream_partition", delivered, "NULL AS data", *untraced)


def selected(events, selection: Selection) -> list:
    """Every selected event once, in original order: what a replay walks."""
    return list(once_each(ordered(events, selection).select(*COLUMNS).toLocalIterator()))


def ids(rows) -> list[str]:
    return [r["id"] for r in rows]


@pytest.mark.jvm
def test_every_event_once_in_original_order(lake_events):
    assert ids(selected(lake_events, Selection())) == ["e3", "e1", "e2", "e4", "e7", "e6", "e5"]


@pytest.mark.jvm
@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (Selection(since_ms=BASE_MS + 10, until_ms=BASE_MS + DAY), ["e1", "e2", "e4", "e7", "e6"]),
        (Selection(topics=("users",)), ["e3"]),
        (Selection(type="delete"), ["e4"]),
        (Selection(from_subscriber="b"), ["e1", "e4"]),
        (Selection(url_prefix="https://o.test/"), ["e1", "e2", "e4"]),
        (Selection(topics=("orders", "users"), until_ms=BASE_MS + 10), ["e3"]),
        # what the lake held when the replay first started: later rows are not its
        (Selection(delivered_before_ms=BASE_MS + 120), ["e3", "e1", "e2"]),
    ],
)
def test_each_filter(lake_events, selection, expected):
    assert ids(selected(lake_events, selection)) == expected


@pytest.mark.jvm
def test_a_dry_run_counts_per_topic_and_day(lake_events):
    found = summary(lake_events, Selection())
    assert found.counts == [("orders", "2026-01-01", 5), ("orders", "2026-01-02", 1),
                            ("users", "2026-01-01", 1)]  # fmt: skip
    assert found.first is not None and found.last is not None
    assert (found.total, found.first["id"], found.last["id"]) == (7, "e3", "e5")
    nothing = summary(lake_events, Selection(topics=("none",)))
    assert (nothing.total, nothing.first, nothing.last) == (0, None, None)


def test_times_are_iso_8601_in_utc_or_epoch_milliseconds():
    assert instant("2026-01-01T00:00:00Z") == BASE_MS
    assert instant("2026-01-01") == BASE_MS  # no zone: UTC
    assert instant("2026-01-01T01:00:00+01:00") == BASE_MS
    assert instant(str(BASE_MS)) == BASE_MS
    with pytest.raises(SelectionError, match="'yesterday' is neither ISO 8601 nor epoch"):
        instant("yesterday")


def test_an_empty_range_is_refused():
    with pytest.raises(SelectionError, match="--until must be after --since"):
        Selection(since_ms=BASE_MS, until_ms=BASE_MS)


def test_once_each_keeps_the_first_copy_of_each_event():
    rows = [
        ("a", 0, 0, 0, 5),
        ("b", 0, 0, 0, 5),
        ("a", 0, 0, 0, 5),
        ("c", 0, 0, 0, 6),
        ("a", 0, 0, 0, 6),
    ]  # fmt: skip  (id, ..., t): an id is only ever met at one t
    assert [r[0] for r in once_each(rows)] == ["a", "b", "c", "a"]

"""Routes: parsing, legacy precedence and the one-event-one-route rule."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.models.fields import Rules
from app.models.route import (
    LEGACY_LANE,
    effective_routes,
    filter_lists,
    parse_route,
    route_tables,
)


def routes(*raw):
    return effective_routes([parse_route(r, f"topics[{i}]", Rules()) for i, r in enumerate(raw)])


def test_legacy_name_is_the_lowest_lane_for_every_type():
    (r,) = routes("orders")
    assert (r.topic, r.lane, r.ttl, r.legacy) == ("orders", LEGACY_LANE, 0, True)
    assert route_tables([r]) == {"orders": {t: (LEGACY_LANE, 0, False) for t in r.types}}


def test_route_objects_override_legacy_names_of_the_same_topic():
    result = routes("orders", {"topic": "orders", "priority": 3, "types": ["create"]}, "users")
    tables = route_tables(result)
    assert tables["orders"] == {"create": (3, 0, False)}  # update/delete/noop: not taken
    assert tables["users"]["update"] == (LEGACY_LANE, 0, False)


def test_highest_priority_matching_route_wins_with_its_ttl():
    tables = route_tables(
        routes(
            {"topic": "orders", "priority": 5, "ttl": 60},
            {"topic": "orders", "priority": 1, "ttl": 10, "types": ["delete"], "coalesce": True},
            {"topic": "orders", "priority": 1, "ttl": 99, "types": ["delete"]},
        )
    )
    assert tables["orders"]["delete"] == (1, 10, True)  # first listed wins a tie
    assert tables["orders"]["create"] == (5, 60, False)


def test_filtered_routes_become_candidates_in_priority_order_up_to_an_unfiltered_one():
    result = routes(
        {"topic": "orders", "priority": 5, "filter": {"data.n": {"$gt": 1}}},
        {"topic": "orders", "priority": 1, "types": ["create"], "filter": {"key": "k"}},
        {"topic": "orders", "priority": 7},
        {"topic": "orders", "priority": 8, "filter": {"url": {"$prefix": "x"}}},
        {"topic": "users", "priority": 2},
    )
    tables = route_tables(result)
    # create: filter 2 (priority 1), then filter 1 (priority 5), then the unfiltered 7
    assert tables["orders"]["create"] == [(1, 0, False, 2), (5, 0, False, 1), (7, 0, False, 0)]
    assert tables["orders"]["delete"] == [(5, 0, False, 1), (7, 0, False, 0)]
    assert tables["users"]["create"] == (2, 0, False)  # no filter: one route, as before
    assert filter_lists(result) == {
        "orders": '[{"data.n": {"$gt": 1}}, {"key": "k"}, {"url": {"$prefix": "x"}}]'
    }
    described = [r.describe()["filter"] for r in result]
    assert described == [
        {"data.n": {"$gt": 1}},
        {"key": "k"},
        None,
        {"url": {"$prefix": "x"}},
        None,
    ]


def test_only_filtered_routes_leave_an_event_no_route_when_none_holds():
    tables = route_tables(routes({"topic": "orders", "filter": {"type": "create"}}))
    assert tables["orders"]["update"] == [(LEGACY_LANE, 0, False, 1)]


def test_a_bad_filter_is_refused_with_its_route_named():
    with pytest.raises(InvalidInput, match=r"topics\[0\]\.filter\.data\.n\.\$gt must be a number"):
        routes({"topic": "orders", "filter": {"data.n": {"$gt": [1]}}})


def test_repeated_legacy_names_collapse():
    assert len(routes("orders", "orders")) == 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("Orders", "topics[0] must match"),
        (5, "must be a topic name or a route object"),
        ({"priority": 1}, "topics[0].topic is required"),
        ({"topic": "o", "priority": 10}, "priority must be between 0 and 9"),
        ({"topic": "o", "priority": "1"}, "priority must be an integer"),
        ({"topic": "o", "ttl": 0}, "ttl must be"),
        ({"topic": "o", "types": []}, "non-empty list"),
        ({"topic": "o", "types": "create"}, "non-empty list"),
        ({"topic": "o", "types": ["created"]}, "types may only hold"),
        ({"topic": "o", "coalesce": 1}, "coalesce must be true or false"),
        ({"topic": "o", "colour": "red"}, "unknown key(s) in topics[0]: colour"),
    ],
)
def test_bad_routes(raw, message):
    with pytest.raises(InvalidInput) as raised:
        routes(raw)
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("name", "meaning"), [("types", "for every type"), ("coalesce", "for the default")]
)
def test_a_null_that_no_listing_shows_is_refused_naming_the_field(name: str, meaning: str):
    with pytest.raises(InvalidInput) as raised:
        routes({"topic": "orders", name: None})
    assert raised.value.message == f"topics[0].{name}: null is not allowed; leave it out {meaning}"


def test_a_route_as_listed_posts_back_as_itself():
    """GET /subscriptions shows a route without priority, ttl or filter with nulls there."""
    (listed,) = routes({"topic": "orders", "types": ["create"]})
    assert listed.describe()["priority"] is None
    (again,) = routes(listed.describe())
    assert again.describe() == listed.describe()
    assert (again.lane, again.ttl, again.content) == (LEGACY_LANE, 0, None)

"""Routemaster's listings without leaking: a client finds its own subscription by its
token (as the official Ruby client does), root sees tokens, nobody sees another client's
token. Names and tokens differ here, so a test can tell which one is shown."""

from __future__ import annotations

from flask.testing import FlaskClient

from spec.app.web.conftest import ROOT, basic, subscribe

CLIENTS = {"shop-token-5f0c": "Shop", "billing-token-9a7d": "Billing", "audit-token-2e8f": "Audit"}


def make_clients(http: FlaskClient) -> dict[str, dict[str, str]]:
    for token, name in CLIENTS.items():
        created = http.post("/api_tokens", json={"name": name, "token": token}, headers=ROOT)
        assert created.status_code == 201
    return {token: basic(token) for token in CLIENTS}


def test_a_client_finds_its_own_subscription_by_its_token(http: FlaskClient):
    auth = make_clients(http)
    for token in ("shop-token-5f0c", "billing-token-9a7d"):
        subscribe(http, auth[token], ["orders"])
    my_token = "shop-token-5f0c"
    listing = http.get("/subscriptions", headers=auth[my_token]).get_json()
    # monitor_subscriptions.find { |s| s.subscriber == my_token }, as the Ruby client does
    mine = [s for s in listing if s["subscriber"] == my_token]
    assert len(mine) == 1 and mine[0]["name"] == "Shop"
    assert "billing-token-9a7d" not in str(listing)


def test_root_sees_every_subscriber_by_token_and_name(http: FlaskClient):
    auth = make_clients(http)
    for token in CLIENTS:
        subscribe(http, auth[token], ["orders"])
    listing = http.get("/subscribers", headers=ROOT).get_json()
    assert sorted((s["subscriber"], s["name"]) for s in listing) == sorted(CLIENTS.items())


def test_topics_show_the_publishers_token_only_to_root_and_to_itself(http: FlaskClient):
    auth = make_clients(http)
    event = {"type": "create", "url": "https://o.test/1"}
    assert (
        http.post("/topics/orders", json=event, headers=auth["shop-token-5f0c"]).status_code == 204
    )
    subscribe(http, auth["billing-token-9a7d"], ["orders", "invoices"])

    def orders(headers: dict[str, str]) -> dict:
        listing = http.get("/topics", headers=headers).get_json()
        return next(t for t in listing if t["name"] == "orders")

    expected = {"name": "orders", "events": 1, "publisher_name": "Shop", "schemas": {}}
    assert orders(ROOT) == {**expected, "publisher": "shop-token-5f0c"}
    assert orders(auth["shop-token-5f0c"]) == {**expected, "publisher": "shop-token-5f0c"}
    for other in ("billing-token-9a7d", "audit-token-2e8f"):
        assert orders(auth[other]) == {**expected, "publisher": "Shop"}
        assert "shop-token-5f0c" not in http.get("/topics", headers=auth[other]).get_data(
            as_text=True
        )
    unclaimed = [t for t in http.get("/topics", headers=ROOT).get_json() if t["name"] == "invoices"]
    assert unclaimed == [
        {"name": "invoices", "publisher": None, "events": 0, "publisher_name": None, "schemas": {}}
    ]

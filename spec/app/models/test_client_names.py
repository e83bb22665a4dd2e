"""Names clients from before share (app/models/client_names.py): listed with what tells
the clients apart, renamed one by one until each name is one client's, a rename cut
short finished by running it again, and never a token in what it says."""

from __future__ import annotations

import pytest
import redis

from app.errors import Conflict, NotFound
from app.lua import Scripts
from app.models import token_calls
from app.models.client_names import ClientNames
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore, fingerprint

NOW = 1_800_000_000_000


@pytest.fixture
def names(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> ClientNames:
    """Three clients named shop, as the code before names were one client's wrote them;
    the first subscribes."""
    for token in ("shop-a", "shop-b", "shop-c"):
        redis_client.hsetnx(keys.tokens, token, "shop")
    body = {"topics": ["orders"], "callback": "https://a.shop.test:8443/in/s3cret"}
    SubscriberStore(redis_client, keys, scripts).subscribe(
        "shop-a", parse_subscription(body, allow_http=False), NOW
    )
    return ClientNames(redis_client, keys, scripts)


def test_shared_names_are_listed_by_fingerprint_with_what_tells_them_apart(names: ClientNames):
    (only,) = names.shared().items()
    name, clients = only
    assert name == "shop"
    assert [c.fingerprint for c in clients] == [
        fingerprint(t) for t in ("shop-a", "shop-b", "shop-c")
    ]
    assert clients[0].subscribes == ["orders"]
    assert clients[0].callback == "https://a.shop.test:8443"  # its origin: never its path
    assert [c.subscribes for c in clients[1:]] == [[], []]
    assert "shop-" not in repr(clients)


def test_renaming_all_but_one_makes_the_name_one_clients(
    names: ClientNames, redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    tokens = TokenStore(redis_client, keys, scripts)
    assert names.rename(names.key_of(fingerprint("shop-a")), "shop-eu").changed
    assert [len(c) for c in names.shared().values()] == [2]
    with pytest.raises(Conflict, match="2 clients are named shop"):
        tokens.create("shop", "shop-next", add=True)
    with pytest.raises(Conflict, match="another client is named shop-eu"):
        names.rename(names.key_of("shop-b"), "shop-eu")
    assert names.rename(names.key_of("shop-b"), "shop-us").old == "shop"
    assert names.shared() == {}
    added = tokens.create("shop", "shop-next", add=True)
    assert added.client == "shop-c"  # the name went to the one client left carrying it
    assert names.key_of(fingerprint("shop-next")) == "shop-c" == names.key_of("shop-next")
    with pytest.raises(Conflict, match="a client named shop-us exists"):
        tokens.create("shop-us")
    assert tokens.name_of("shop-a") == "shop-eu"
    assert redis_client.hget(keys.subscriber("shop-a"), "name") == b"shop-eu"


def test_a_rename_cut_short_after_the_catalog_is_finished_by_running_it_again(
    names: ClientNames, redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    scripts.run(token_calls.rename(keys, "shop-a", "shop-eu"))  # the catalog step only
    assert redis_client.hget(keys.subscriber("shop-a"), "name") == b"shop"
    again = names.rename("shop-a", "shop-eu")
    assert (again.old, again.changed) == ("shop-eu", False)
    assert redis_client.hget(keys.subscriber("shop-a"), "name") == b"shop-eu"


def test_an_unknown_client_is_not_found_and_the_answer_repeats_nothing(names: ClientNames):
    for given in ("fp_000000000000", "not-a-client-token"):
        with pytest.raises(NotFound) as missing:
            names.key_of(given)
        assert given not in missing.value.message
    with pytest.raises(NotFound):
        names.rename("no-such-key", "fresh")

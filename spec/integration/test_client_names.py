"""One name, one client, from outside (issue 53, defect 5): real `busbar web` and
`busbar worker` processes on one Redis and on a cluster. A name in use is a 409 naming
it, however many ask at once; a token added to a client acts on its one subscription,
whose deliveries reach one subscriber under one name in the delivery log (what the lake
reads); deleting one of its two tokens leaves the other working. Names shared by
clients from before are listed and mended with `busbar clients`, never printing a
token."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import redis

from app.models.keys import Keys
from app.models.tokens import fingerprint
from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving


def create(b: Bus, body: dict) -> tuple[int, dict]:
    answer = b.call("POST", "/api_tokens", ROOT_KEY, body)
    return answer.status_code, answer.json()


def named_in_the_delivery_log(client: redis.Redis, keys: Keys, key: str) -> set[bytes]:
    log = client.xrange(keys.home(key).delivery_log)
    return {fields[b"subscriber"] for _, fields in log}


def test_one_name_one_client_and_a_second_token_acts_as_it(redis_url: str, tmp_path: Path):
    with serving() as sub, bus(redis_url, tmp_path) as b:
        b.client("pub")
        answers: list[int] = []
        start = threading.Barrier(6)

        def race(n: int) -> None:
            start.wait()
            answers.append(create(b, {"name": "shop", "token": f"shop-{n}"})[0])

        racers = [threading.Thread(target=race, args=(n,)) for n in range(6)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert sorted(answers) == [201] + [409] * 5  # two creations of one name: one wins
        (first,) = [t["token"] for t in b.call("GET", "/api_tokens", ROOT_KEY).json()
                    if t["name"] == "shop"]  # fmt: skip
        status, refused = create(b, {"name": "shop"})
        assert status == 409 and "a client named shop exists" in refused["error"]
        status, added = create(b, {"name": "shop", "token": "shop-next", "add": True})
        assert status == 201 and added["token"] == "shop-next"

        b.subscribe(first, sub.url, ["orders"], max=1, timeout=0)
        entry = b.subscription("shop-next")  # the same subscription, read with the other
        assert (entry["name"], entry["topics"], entry["callback"]) == ("shop", ["orders"], sub.url)
        b.subscribe("shop-next", sub.url, ["orders"], max=2, timeout=0)  # replaces it
        rows = b.call("GET", "/subscriptions", ROOT_KEY).json()
        assert [(r["name"], r["max_events"]) for r in rows] == [("shop", 2)]
        b.publish("pub", "orders", events(4))
        wait_until(lambda: len(sub.delivered) == 4, 30, "the four events, delivered once")
        assert {r.user for r in sub.received} == {entry["uuid"]}  # one subscriber's uuid
        client = b.redis()
        assert named_in_the_delivery_log(client, b.keys, first) == {b"shop"}

        # one of its two tokens goes: the client works on with the other
        assert b.call("DELETE", f"/api_tokens/{first}", ROOT_KEY).status_code == 204
        assert b.call("GET", "/pulse", first).status_code == 401
        assert b.call("GET", "/pulse", "shop-next").status_code == 204
        b.publish("pub", "orders", events(2, start=4))
        wait_until(lambda: len(sub.delivered) == 6, 30, "the events after the delete")
        # the subscriber has the last batch before the worker's acknowledgement counts it
        sent = lambda: b.subscription("shop-next")["events"]["sent"]  # noqa: E731
        wait_until(lambda: sent() == 6, 30, "the six acknowledged")
        assert named_in_the_delivery_log(client, b.keys, first) == {b"shop"}
        client.close()


def busbar(b: Bus, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "busbar", *args], env=b.env, capture_output=True, text=True,
        timeout=60, cwd=b.log_dir,
    )  # fmt: skip


def test_busbar_clients_lists_shared_names_and_renames_one(redis_url: str, tmp_path: Path):
    with serving() as sub, bus(redis_url, tmp_path) as b:
        b.client("pub")
        client = b.redis()
        # two clients named shop, as the code before names were one client's wrote them
        client.hsetnx(b.keys.tokens, "shop-old-token", "shop")
        client.hsetnx(b.keys.tokens, "shop-new-token", "shop")
        b.subscribe("shop-old-token", sub.url, ["orders"], max=1, timeout=0)
        b.publish("shop-new-token", "refunds", events(1))
        dead = b.call("GET", "/subscribers/shop/deadletters", ROOT_KEY)
        assert dead.status_code == 200  # one of the two subscribes: it is found by name
        assert create(b, {"name": "shop"})[0] == 409

        shared = busbar(b, "clients", "shared")
        assert shared.returncode == 0, shared.stderr
        old, new = fingerprint("shop-old-token"), fingerprint("shop-new-token")
        lines = shared.stdout.splitlines()
        assert lines[0] == "shop: 2 clients"
        by_print = {line.split()[0]: line for line in lines[1:]}
        assert set(by_print) == {old, new}
        origin = sub.url.split("/", 3)[:3]
        assert f"subscribes to orders (callback {'/'.join(origin)})" in by_print[old]
        assert "publishes refunds" in by_print[new] and "no subscription" in by_print[new]
        assert "token" not in shared.stdout  # no token printed, whole or in part

        taken = busbar(b, "clients", "rename", old, "pub")
        assert taken.returncode == 1
        assert taken.stderr.strip() == (
            "busbar clients: another client is named pub; choose another name"
        )
        unknown = busbar(b, "clients", "rename", "fp_000000000000", "shop-eu")
        assert unknown.returncode == 1
        assert "no client has that fingerprint or token" in unknown.stderr
        renamed = busbar(b, "clients", "rename", old, "shop-eu")
        assert renamed.returncode == 0, renamed.stderr
        assert renamed.stdout == f"shop ({old}) is now named shop-eu\n"
        again = busbar(b, "clients", "rename", old, "shop-eu")
        assert again.stdout == f"{old} is named shop-eu already\n"
        assert (
            busbar(b, "clients", "shared").stdout == "no name is shared: every client has its own\n"
        )

        assert b.subscription("shop-old-token")["name"] == "shop-eu"
        assert b.call("GET", "/subscribers/shop-eu/deadletters", ROOT_KEY).status_code == 200
        assert create(b, {"name": "shop"})[0] == 409  # still the other's
        assert (
            create(b, {"name": "shop", "token": "shop-2", "add": True})[0] == 201
        )  # mended: the name is one client's, which may have two tokens
        b.publish("shop-2", "refunds", events(1, start=1))
        b.publish("pub", "orders", events(1))
        wait_until(lambda: len(sub.delivered) == 1, 30, "a delivery under the new name")
        # the subscriber has the batch before the worker's acknowledgement writes the
        # delivery log (once read before it, on make test's load): waited for, then
        # what the lake's `subscriber` says is the new name alone
        wait_until(
            lambda: named_in_the_delivery_log(client, b.keys, "shop-old-token"), 30,
            "the delivery's entry in the delivery log",
        )  # fmt: skip
        log_names = named_in_the_delivery_log(client, b.keys, "shop-old-token")
        assert log_names == {b"shop-eu"}
        client.close()

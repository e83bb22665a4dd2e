"""GET /subscriptions from real `busbar web` and `busbar worker` processes on both layouts:
230 subscribers over the shards, some at concurrency 3, a few holding a delivery; every
page of the listing (`?limit`, the `Link` header's next) together is the whole listing,
in the order of the clients' names. (A listing script's budget, and what it leaves for
the next round: spec/app/web/test_subscription_listing.py.)"""

from __future__ import annotations

import threading
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import Received, Subscriber, serving

COUNT = 230


def test_pages_of_many_subscribers_make_the_whole_listing(
    redis_url: str, redis_client, tmp_path: Path
):
    release = threading.Event()

    def hold(_: Received) -> tuple[int, float]:
        release.wait(60)
        return 200, 0.0

    with (
        bus(redis_url, tmp_path) as b,
        serving() as quick,
        serving(Subscriber(responder=hold)) as slow,
    ):
        names = [f"c{i:03}" for i in reversed(range(COUNT))]
        held = names[:3]
        for i, name in enumerate(names):
            url = slow.url if name in held else quick.url
            topics = ["held"] if name in held else ["quiet"]
            concurrency = 3 if i % 7 == 0 and name not in held else 1
            b.subscribe(b.client(name), url, topics, max=1, timeout=0, concurrency=concurrency)
        b.client("pub")
        b.publish("pub", "held", events(2))
        try:

            def listing() -> list[dict]:
                response = b.call("GET", "/subscriptions", ROOT_KEY)
                assert response.status_code == 200 and "Link" not in response.headers
                return response.json()

            wait_until(
                lambda: sum(e["in_flight"] for e in listing() if e["name"] in held) == 3,
                what="each held subscriber's delivery in flight",
            )
            every = listing()
            assert [e["name"] for e in every] == sorted(names)
            by_name = {e["name"]: e for e in every}
            assert all(
                by_name[name]["concurrency"] == (3 if i % 7 == 0 and name not in held else 1)
                for i, name in enumerate(names)
            )
            assert all(by_name[name]["events"]["queued"] == 2 for name in held)
            pages, path = [], "/subscriptions?limit=40"
            while path:
                response = b.call("GET", path, ROOT_KEY)
                assert response.status_code == 200
                pages.append(response.json())
                path = response.links.get("next", {}).get("url")
            assert [len(p) for p in pages] == [40] * 5 + [30]
            assert [e for p in pages for e in p] == every
        finally:
            release.set()

"""The publish rate limit from outside, with real processes and a subscriber (issue 23
item 4: one client published 246,000 events in a burst and filled Redis for everyone).
A publisher over BUSBAR_PUBLISH_RATE hears 429 with Retry-After and nothing of that
publish is queued; another publisher is untouched; after the wait it is taken again,
and the Python client does that wait by itself."""

from __future__ import annotations

import time
from pathlib import Path

from busbar_client import Busbar

from spec.integration.bus import bus, events
from spec.integration.subscriber import serving


def test_a_publisher_over_its_rate_gets_429_with_retry_after_and_nothing_is_queued(
    redis_url: str, tmp_path: Path
) -> None:
    limits = {"BUSBAR_PUBLISH_RATE": "20", "BUSBAR_PUBLISH_BURST": "100",
              "BUSBAR_MAX_PUBLISH_EVENTS": "100"}  # fmt: skip
    with serving() as sub, bus(redis_url, tmp_path, **limits) as b:
        for token in ("flood", "calm", "audit"):
            b.client(token)
        b.subscribe("audit", sub.url, ["orders", "invoices"], max=100, timeout=0)
        b.publish("flood", "orders", events(100))  # the whole bucket at once
        over = b.http.post(
            f"{b.base}/topics/orders", json=events(10, 100), auth=("flood", ""), timeout=10
        )
        assert over.status_code == 429, over.text
        assert "BUSBAR_PUBLISH_RATE" in over.json()["error"]
        assert over.headers["Retry-After"] == "1"  # 10 events at 20 a second: 0.5 s
        b.publish("calm", "invoices", events(3, 1000))  # another publisher's own bucket
        sub.wait_for(103)

        time.sleep(1)  # the Retry-After
        b.publish("flood", "orders", events(10, 200))
        sub.wait_for(113)

        # the client waits out the 429 by itself: a whole bucket's worth is more than
        # has come back since, so the first try is refused and a retry taken
        flood = Busbar(b.base, "flood", retries=3)
        started = time.monotonic()
        flood.publish("orders", events(100, 300))
        assert time.monotonic() - started >= 0.9  # it waited, it did not fail
        sub.wait_for(213)

    numbers = sorted(e["data"]["i"] for e in sub.delivered)
    assert numbers == [*range(100), *range(200, 210), *range(300, 400), *range(1000, 1003)]

"""`Idempotency-Key` from outside, with real processes and subscribers: a key is the
publisher's own, for its topic, and a key reused with another body is refused rather
than swallowed (issue 23 item 2: two publishers sharing `order-123` lost an event)."""

from __future__ import annotations

from pathlib import Path

import requests

from spec.integration.bus import Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving


def publish(b: Bus, token: str, topic: str, body: object, key: str) -> requests.Response:
    return b.http.post(
        f"{b.base}/topics/{topic}", json=body, auth=(token, ""),
        headers={"Idempotency-Key": key}, timeout=10,
    )  # fmt: skip


def test_a_key_is_scoped_to_its_publisher_and_a_reuse_with_another_body_is_refused(
    redis_url: str, redis_client, tmp_path: Path
) -> None:
    with serving() as sub, bus(redis_url, tmp_path) as b:
        for token in ("shop", "billing", "audit"):
            b.client(token)
        b.subscribe("audit", sub.url, ["orders", "invoices"], max=1, timeout=0)
        # two publishers, one key: each publish is its own
        assert publish(b, "shop", "orders", events(1), "order-123").status_code == 204
        assert publish(b, "billing", "invoices", events(1, 10), "order-123").status_code == 204
        sub.wait_for(2)
        # the same publish again: answered 204, queued nothing twice
        assert publish(b, "shop", "orders", events(1), "order-123").status_code == 204
        # the same key with another body: refused, naming the problem; nothing queued
        refused = publish(b, "shop", "orders", events(1, 20), "order-123")
        assert refused.status_code == 422
        assert "Idempotency-Key was already used with another body" in refused.json()["error"]
        b.publish("shop", "orders", events(1, 30))  # a marker: everything before it is in
        sub.wait_for(3)
        # received is not yet acknowledged: under load the marker's ack came after the
        # listing was read (queued 1); once three are acknowledged, none may be left
        wait_until(lambda: b.subscription("audit")["events"]["sent"] == 3, 30, "three acks")
        assert b.subscription("audit")["events"]["queued"] == 0

    numbers = [e["data"]["i"] for e in sub.delivered]
    assert sorted(numbers) == [0, 10, 30], numbers

"""Event data of the sizes users send, through real `busbar web` and `busbar worker`
processes to a real subscriber: BUSBAR_MAX_EVENT_DATA is 256 KiB by default (Routemaster's
64 bytes only when set), a 400 over it names the setting, a bulk publish over the body
limit is the body limit's 413, and batches of large events close at about 1 MiB
(BATCH_BYTES) instead of `max` x 256 KiB."""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.integration.bus import bus
from spec.integration.subscriber import serving

LIMIT = 256 * 1024


def test_large_data_is_delivered_whole_in_batches_of_about_a_mib(
    redis_url: str, redis_client, tmp_path: Path
):
    with serving() as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=100, timeout=60_000)
        ten_kb = {"note": "n" * 10_000, "items": list(range(100))}
        b.publish("pub", "orders", {"type": "create", "url": "https://o.test/a", "data": ten_kb})
        over = {"type": "create", "url": "https://o.test/b", "data": {"p": "x" * LIMIT}}
        response = b.call("POST", "/topics/orders", "pub", over)
        assert response.status_code == 400
        assert response.json() == {
            "error": f"data is {LIMIT + 8} bytes of msgpack, over the {LIMIT} allowed "
            "(BUSBAR_MAX_EVENT_DATA)"
        }
        bulk = [{**over, "data": {"p": "x" * (LIMIT - 8)}}] * 100
        response = b.call("POST", "/topics/orders", "pub", bulk)
        assert response.status_code == 413
        assert "BUSBAR_MAX_BODY_BYTES" in response.json()["error"]
        # 200 KiB events: a batch is full at the one that takes it over 1 MiB (the 10 KB
        # event and six, then six), long before `max`
        large = [
            {"type": "update", "url": f"https://o.test/{i}", "data": {"i": i, "p": "y" * 204_800}}
            for i in range(12)
        ]
        for start in range(0, 12, 4):  # four to a request: under the 1 MiB body limit
            b.publish("pub", "orders", large[start : start + 4])
        got = sub.wait_for(13)
    assert got[0]["data"] == ten_kb
    assert [e["data"]["i"] for e in got[1:]] == list(range(12))
    assert all(e["data"]["p"] == "y" * 204_800 for e in got[1:])
    assert [len(r.events) for r in sub.received] == [7, 6]
    assert max(len(r.raw) for r in sub.received) < 1_300_000


@pytest.mark.single_node  # the web alone: a limit of its own
def test_routemasters_64_bytes_hold_when_set(redis_url: str, redis_client, tmp_path: Path):
    with bus(redis_url, tmp_path, workers=0, BUSBAR_MAX_EVENT_DATA="64") as b:
        b.client("pub")
        fits = {"type": "create", "url": "https://o.test/1", "data": {"p": "x" * 59}}
        b.publish("pub", "orders", fits)  # 64 bytes of msgpack
        over = {**fits, "data": {"p": "x" * 60}}
        response = b.call("POST", "/topics/orders", "pub", over)
        assert response.status_code == 400
        assert response.json() == {
            "error": "data is 65 bytes of msgpack, over the 64 allowed (BUSBAR_MAX_EVENT_DATA)"
        }

"""What the console's subscription listing costs as a backlog grows: `GET /subscriptions`
counts events per lane with one LLEN per queued batch. Standalone (not in `make bench`):

    .venv/bin/python -m bench.console_listing

In-process (Flask test client) against a real Redis-compatible server: one subscriber,
batches of 100, medians of 7 listings as root with 0, 1,000 and 10,000 batches queued.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import redis

from app.web import create_app
from config.settings import Settings
from dev import redis_server
from spec.app.web.conftest import basic

ROOT = "root-key-for-bench-000"


def main() -> None:
    server = redis_server.start(Path(tempfile.mkdtemp()), persistent=False)
    try:
        client = redis.Redis.from_url(server.url)
        http = create_app(Settings(redis_url=server.url, root_key=ROOT), client).test_client()
        for token in ("pub", "sub"):
            http.post("/api_tokens", json={"name": token, "token": token}, headers=basic(ROOT))
        subscription = {"topics": ["orders"], "callback": "https://x.test/in", "max": 100,
                        "timeout": 3_600_000}  # fmt: skip
        http.post("/subscription", json=subscription, headers=basic("sub"))
        events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(500)]
        for batches in (0, 1_000, 10_000):
            while int(client.hget("busbar:batches:gauges:batch", "sub") or 0) < batches:
                assert (
                    http.post("/topics/orders", json=events, headers=basic("pub")).status_code
                    == 204
                )
            runs = []
            for _ in range(7):
                start = time.perf_counter()
                listed = http.get("/subscriptions", headers=basic(ROOT)).get_json()
                runs.append(time.perf_counter() - start)
            print(f"{batches} batches queued {listed[0]['lanes']}: "
                  f"GET /subscriptions median {statistics.median(runs) * 1000:.1f} ms")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()

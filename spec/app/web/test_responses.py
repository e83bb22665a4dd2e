"""Small things a user trips on: 204s without a content type, and /pulse/scaling that
cannot hold every web thread."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import redis
from flask.testing import FlaskClient

from app.models.keys import Keys
from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import ROOT, basic, subscribe


def test_no_content_has_no_content_type(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    event = {"type": "create", "url": "https://o.test/1"}
    answers = [
        http.get("/pulse", headers=sub),
        http.post("/topics/orders", json=event, headers=pub),
        http.post("/subscription", json={"topics": ["orders"], "callback": "https://s.test/"},
                  headers=sub),
        http.delete("/subscriber/topics/orders", headers=sub),
        http.delete("/api_tokens/nobody", headers=ROOT),
    ]  # fmt: skip
    assert [a.status_code for a in answers] == [204] * 5
    assert [a.headers.get("Content-Type") for a in answers] == [None] * 5
    assert all(a.get_data() == b"" for a in answers)
    assert http.get("/pulse").headers["Content-Type"] == "application/json"  # errors keep theirs


def test_pulse_scaling_waits_in_at_most_half_the_threads(
    settings: Settings, redis_client: redis.Redis, keys: Keys
):
    app = create_app(replace(settings, web_threads=4), redis_client)  # 2 may wait at once
    http = app.test_client()
    http.post("/api_tokens", json={"name": "probe", "token": "probe"}, headers=ROOT)
    redis_client.lpush(
        keys.home("sub").jobs_instant("main"), *[f"job{i}" for i in range(101)]
    )  # backlog
    took: list[float] = []

    def probe() -> None:
        started = time.monotonic()
        assert http.get("/pulse/scaling", headers=basic("probe")).status_code == 204
        took.append(time.monotonic() - started)

    threads = [threading.Thread(target=probe) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    slow = [t for t in took if t >= 0.9]
    assert len(took) == 6 and len(slow) == 2, took
    redis_client.delete(keys.home("sub").jobs_instant("main"))
    started = time.monotonic()
    assert http.get("/pulse/scaling", headers=ROOT).status_code == 204
    assert time.monotonic() - started < 0.5  # no backlog: no wait

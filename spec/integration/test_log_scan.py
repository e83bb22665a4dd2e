"""No credential in any log line: `busbar web` and `busbar worker` as real processes at
debug level, against a Redis that wants a password, delivering to a subscriber that
answers 500, one that is not listening and one that works; then every line both wrote
is searched for the tokens, the root key, the callbacks' uuids, the Redis password and
userinfo. Also: a callback with userinfo is a 400 that does not echo it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from dev import redis_server
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.processes import free_port, wait_until
from spec.integration.subscriber import Subscriber, serving

REDIS_PASSWORD = "redis-pw-7f3a9c"
USERINFO = re.compile(r"://[^/\s@]*@")


@pytest.fixture
def locked_redis(tmp_path: Path):
    server = redis_server.start(
        tmp_path / "redis", persistent=False, options={"requirepass": REDIS_PASSWORD}
    )
    try:
        yield f"redis://:{REDIS_PASSWORD}@127.0.0.1:{server.port}/0"
    finally:
        server.stop()


def test_no_token_password_or_userinfo_in_any_log_line(locked_redis: str, tmp_path: Path):
    failing = Subscriber(responder=lambda _: (500, 0.0))
    with (
        serving(failing) as broken,
        serving() as working,
        bus(locked_redis, tmp_path, BUSBAR_LOG_LEVEL="debug", BUSBAR_MAX_BACKOFF_MS="200") as b,
    ):
        secrets = [ROOT_KEY, REDIS_PASSWORD]
        tokens = {}
        for name in ("shop", "billing", "audit", "orders"):
            made = b.call("POST", "/api_tokens", ROOT_KEY, {"name": name}).json()
            tokens[name] = made["token"]
        secrets += tokens.values()
        nobody = f"http://127.0.0.1:{free_port()}/events"  # connection refused
        for name, url in (("billing", broken.url), ("audit", nobody), ("shop", working.url)):
            uuid = f"{name}-uuid-secret-{len(secrets)}"
            secrets.append(uuid)
            b.subscribe(tokens[name], url, ["orders"], max=5, timeout=0, uuid=uuid)
        userinfo = {"topics": ["orders"], "callback": "http://u:hunter2@127.0.0.1:9/x"}
        refused = b.call("POST", "/subscription", tokens["shop"], userinfo)
        assert refused.status_code == 400
        assert "must not hold a user or password" in refused.json()["error"]
        assert "hunter2" not in refused.text
        b.publish(tokens["orders"], "orders", events(5))
        working.wait_for(5)
        wait_until(lambda: len(failing.received) >= 2, what="retries to the failing subscriber")
        wait_until(
            lambda: b.subscription(tokens["audit"])["health_points"] < 100,
            what="a failed attempt on the closed port",
        )
        assert b.call("GET", "/metrics", ROOT_KEY).status_code == 200
        assert b.call("GET", "/pulse", tokens["shop"]).status_code == 204
    logs = {path.name: path.read_text() for path in tmp_path.glob("*.log")}
    assert set(logs) >= {"web.log", "worker0.log"}
    worker = logs["worker0.log"]
    assert "stopped" in worker
    # logs name the client, the callback's host and the reason (app/services/failure.py)
    assert re.search(r"delivery to billing at 127\.0\.0\.1 failed: 500 ", worker)
    assert re.search(r"delivery to audit at 127\.0\.0\.1 failed: connection_refused ", worker)
    for name, text in logs.items():
        for number, line in enumerate(text.splitlines(), 1):
            leaked = [s for s in secrets if s in line]
            assert not leaked, f"{name}:{number} shows {leaked}: {line}"
            assert not USERINFO.search(line), f"{name}:{number} shows userinfo: {line}"
    assert redis.Redis.from_url(locked_redis).ping()  # the password was needed and used

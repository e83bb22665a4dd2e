"""The client's own behaviour against a scripted HTTP server: retries where safe, with
backoff and Retry-After; errors that carry the server's message; and that it stands
alone (no Flask, Starlette or Redis needed). Its API against a real bus is in
spec/integration/test_python_client.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from busbar_client import (
    BadRequest,
    Busbar,
    ConnectionFailed,
    NewEvent,
    Route,
    Unavailable,
)

from dev.redis_server import free_port
from spec.integration.subscriber import Subscriber, serving


@dataclass
class Script:
    """Answers in order (then 204), and what each request was."""

    answers: list[int]
    seen: list = field(default_factory=list)

    def __call__(self, received) -> tuple[int, float]:
        self.seen.append(received)
        return (self.answers.pop(0) if self.answers else 204), 0.0


@contextmanager
def scripted(*answers: int) -> Iterator[tuple[Busbar, Script]]:
    script = Script(list(answers))
    with serving(Subscriber(responder=script)) as sub:
        base = sub.url.removesuffix("/events")
        yield Busbar(base, "pub-token", retries=3, backoff=0.01), script


def test_a_publish_is_retried_on_503_with_the_same_publish_id_and_body():
    with scripted(503, 503) as (bus, script):
        sent = bus.publish("orders", [NewEvent("create", "https://o.test/1", {"a": 1})])
    assert len(script.seen) == 3
    assert {r.headers["Idempotency-Key"] for r in script.seen} == {sent}
    assert [r.raw for r in script.seen] == [script.seen[0].raw] * 3
    assert json.loads(script.seen[0].raw) == [
        {"type": "create", "url": "https://o.test/1", "data": {"a": 1}}
    ]
    assert script.seen[0].user == "pub-token" and script.seen[0].path == "/topics/orders"


def test_one_event_is_sent_as_an_object_and_a_given_publish_id_is_kept():
    with scripted() as (bus, script):
        assert bus.publish("orders", {"type": "noop", "url": "https://o.test/2"}, publish_id="p1")
    (request,) = script.seen
    assert json.loads(request.raw) == {"type": "noop", "url": "https://o.test/2"}
    assert request.headers["Idempotency-Key"] == "p1"


def test_retries_run_out_into_an_error_naming_the_status():
    with scripted(503, 503, 503, 503) as (bus, script), pytest.raises(Unavailable) as err:
        bus.publish("orders", NewEvent("create", "https://o.test/1"))
    assert err.value.status == 503 and len(script.seen) == 4


def test_rotating_a_secret_is_never_repeated():
    with scripted(503) as (bus, script), pytest.raises(Unavailable):
        bus.rotate_secret()
    assert len(script.seen) == 1


def test_a_400_is_not_retried_and_carries_the_servers_message():
    port = free_port()
    with serving(Subscriber(responder=lambda _: (400, 0.0))) as sub:
        bus = Busbar(sub.url.removesuffix("/events"), "t", backoff=0.01)
        with pytest.raises(BadRequest) as err:
            bus.subscribe(f"http://127.0.0.1:{port}/in", ["orders", Route("users", priority=1)])
    assert err.value.status == 400 and len(sub.received) == 1
    assert sub.received[0].events == {
        "topics": ["orders", {"topic": "users", "priority": 1}],
        "callback": f"http://127.0.0.1:{port}/in",
    }


def test_no_answer_is_retried_then_a_connection_error():
    bus = Busbar(f"http://127.0.0.1:{free_port()}", "t", retries=2, backoff=0.05)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed):
        bus.topics()
    assert time.monotonic() - started >= 0.05  # it waited between attempts


def test_the_client_stands_alone_without_flask_starlette_or_redis(project_root: Path):
    """What `pip install clients/python` gives: its two dependencies, nothing of the bus."""
    blocked = ["flask", "starlette", "redis", "msgpack", "app", "config", "workers"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import busbar_client\n"
        "from busbar_client import Busbar, WsgiReceiver, AsgiReceiver\n"
        "WsgiReceiver(print, secret='whsec_' + 'A' * 44); AsgiReceiver(print, uuid='u')\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert result.stdout.strip() == "ok", result.stderr
    pyproject = (project_root / "clients/python/pyproject.toml").read_text()
    deps = pyproject.split("dependencies = [")[1].split("]")[0]
    assert [line.strip().strip('",') for line in deps.strip().splitlines()] == [
        "requests>=2.31,<3",
        "standardwebhooks>=1.1,<2",
    ]

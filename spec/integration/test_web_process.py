"""`busbar web` as users run it: a gunicorn process on a port, spoken to over HTTP."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from spec.conftest import ROOT_KEY
from spec.integration.bus import web_env
from spec.integration.processes import answers, busbar_env, free_port, running, wait_until


def test_web_refuses_to_start_without_a_root_key(redis_url: str):
    result = subprocess.run(
        [sys.executable, "-m", "busbar", "web"],
        env=busbar_env(BUSBAR_REDIS_URL=redis_url, PORT=str(free_port())),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "BUSBAR_ROOT_KEY is not set" in result.stderr


def test_web_refuses_a_bad_setting_naming_it(redis_url: str):
    result = subprocess.run(
        [sys.executable, "-m", "busbar", "web"],
        env=busbar_env(
            BUSBAR_REDIS_URL=redis_url, BUSBAR_ROOT_KEY=ROOT_KEY, BUSBAR_WEB_WORKERS="lots"
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "BUSBAR_WEB_WORKERS: expected an integer" in result.stderr


@pytest.fixture
def web(redis_url: str, redis_client, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A real `busbar web` on a free port; each test stops it with SIGTERM and checks exit 0."""
    port = free_port()
    env = web_env(redis_url, port)
    base = f"http://127.0.0.1:{port}"
    with running(["web"], env, log=tmp_path / "web.log") as process:
        wait_until(lambda: answers(f"{base}/health"), what="busbar web to answer")
        yield base, process


def stops_cleanly(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def test_web_serves_tokens_over_real_http(web):
    base, process = web
    root = (ROOT_KEY, "")
    with requests.Session() as http:  # one keep-alive connection for every call
        assert http.get(f"{base}/pulse").status_code == 401
        created = http.post(f"{base}/api_tokens", json={"name": "orders"}, auth=root)
        assert created.status_code == 201
        token = created.json()["token"]
        pulse = http.get(f"{base}/pulse", auth=(token, ""))
        assert pulse.status_code == 204 and "Content-Type" not in pulse.headers
        listed = http.get(f"{base}/api_tokens", auth=root)
        assert listed.json() == [{"name": "orders", "token": token}]
        bad = http.post(f"{base}/api_tokens", data="{", auth=root)
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
        assert http.delete(f"{base}/api_tokens/{token}", auth=root).status_code == 204
        assert http.get(f"{base}/pulse", auth=(token, "")).status_code == 401
    stops_cleanly(process)


def test_publish_and_subscribe_over_real_http(web):
    """The Routemaster client's path: tokens, subscribe, publish one and many, list."""
    base, process = web
    with requests.Session() as http:

        def post(path: str, body: object, token: str) -> int:
            return http.post(f"{base}{path}", json=body, auth=(token, "")).status_code

        for name in ("pub", "sub"):
            assert post("/api_tokens", {"name": name, "token": name}, ROOT_KEY) == 201
        subscription = {"topics": ["orders"], "callback": "https://sub.test/in", "max": 10}
        assert post("/subscription", subscription, "sub") == 204
        one = {"type": "create", "url": "https://o.test/1", "timestamp": None}
        assert post("/topics/orders", one, "pub") == 204
        many = [{"type": "update", "url": f"https://o.test/{i}"} for i in range(25)]
        assert post("/topics/orders", many, "pub") == 204
        (listing,) = http.get(f"{base}/subscriptions", auth=("sub", "")).json()
        assert listing["events"]["queued"] == 26
        assert http.get(f"{base}/topics", auth=("sub", "")).json() == [
            {"name": "orders", "publisher": "pub", "events": 26, "publisher_name": "pub"}
        ]
        assert post("/topics/orders", one, "sub") == 403
    stops_cleanly(process)

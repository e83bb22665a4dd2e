"""`busbar web` as users run it: a gunicorn process on a port, spoken to over HTTP."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import requests

from spec.conftest import ROOT_KEY
from spec.integration.processes import answers, busbar_env, free_port, running, wait_until


def test_web_refuses_to_start_without_a_root_key(redis_url: str):
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli", "web"],
        env=busbar_env(BUSBAR_REDIS_URL=redis_url, PORT=str(free_port())),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "BUSBAR_ROOT_KEY is not set" in result.stderr


def test_web_refuses_a_bad_setting_naming_it(redis_url: str):
    result = subprocess.run(
        [sys.executable, "-m", "workers.cli", "web"],
        env=busbar_env(
            BUSBAR_REDIS_URL=redis_url, BUSBAR_ROOT_KEY=ROOT_KEY, BUSBAR_WEB_WORKERS="lots"
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "BUSBAR_WEB_WORKERS: expected an integer" in result.stderr


def test_web_serves_tokens_over_real_http(redis_url: str, redis_client, tmp_path: Path):
    port = free_port()
    env = busbar_env(
        BUSBAR_REDIS_URL=redis_url,
        BUSBAR_ROOT_KEY=ROOT_KEY,
        PORT=str(port),
        BUSBAR_HOST="127.0.0.1",
    )
    base = f"http://127.0.0.1:{port}"
    with running(["web"], env, log=tmp_path / "web.log") as web:
        wait_until(lambda: answers(f"{base}/health"), what="busbar web to answer")
        with requests.Session() as http:  # one keep-alive connection for every call
            assert http.get(f"{base}/pulse").status_code == 401
            created = http.post(f"{base}/api_tokens", json={"name": "orders"}, auth=(ROOT_KEY, ""))
            assert created.status_code == 201
            token = created.json()["token"]
            assert http.get(f"{base}/pulse", auth=(token, "")).status_code == 204
            listed = http.get(f"{base}/api_tokens", auth=(ROOT_KEY, ""))
            assert listed.json() == [{"name": "orders", "token": token}]
            bad = http.post(f"{base}/api_tokens", data="{", auth=(ROOT_KEY, ""))
            assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
            assert http.delete(f"{base}/api_tokens/{token}", auth=(ROOT_KEY, "")).status_code == 204
            assert http.get(f"{base}/pulse", auth=(token, "")).status_code == 401
        web.send_signal(signal.SIGTERM)
        assert web.wait(30) == 0

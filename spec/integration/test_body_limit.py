"""BUSBAR_MAX_BODY_BYTES through real gunicorn: declared and chunked bodies over the
limit get 413, and the server keeps answering afterwards.

On one Redis (`layout_free`): gunicorn refuses the body before any Redis call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from spec.conftest import ROOT_KEY
from spec.integration.bus import web_env
from spec.integration.processes import free_port, running, wait_until, web_ready

pytestmark = pytest.mark.layout_free

LIMIT = 4096
ROOT = (ROOT_KEY, "")


@pytest.fixture
def base(redis_url: str, redis_client, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = web_env(redis_url, port, BUSBAR_MAX_BODY_BYTES=str(LIMIT), BUSBAR_WEB_WORKERS="1")
    url = f"http://127.0.0.1:{port}"
    with running(["web"], env, log=tmp_path / "web.log"):
        wait_until(lambda: web_ready(tmp_path / "web.log", port), what="busbar web to answer")
        yield url


def _chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """A generator body: requests sends it with Transfer-Encoding: chunked, no length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def _token_body(padding: int) -> bytes:
    return b'{"name": "orders"}' + b" " * padding


def test_oversized_bodies_are_413_and_the_server_goes_on(base: str):
    with requests.Session() as http:
        declared = http.post(f"{base}/api_tokens", data=_token_body(LIMIT), auth=ROOT)
        assert declared.status_code == 413
        assert declared.json() == {
            "error": f"request body is larger than BUSBAR_MAX_BODY_BYTES ({LIMIT} bytes)"
        }
        chunked = http.post(f"{base}/api_tokens", data=_chunks(_token_body(LIMIT)), auth=ROOT)
        assert chunked.request.headers["Transfer-Encoding"] == "chunked"
        assert chunked.status_code == 413
        assert "BUSBAR_MAX_BODY_BYTES" in chunked.json()["error"]
        assert http.get(f"{base}/api_tokens", auth=ROOT).status_code == 204  # nothing created
        fits = _token_body(LIMIT - len(_token_body(0)))
        assert http.post(f"{base}/api_tokens", data=_chunks(fits), auth=ROOT).status_code == 201

"""Request framing from outside: `busbar web` (both worker classes) sent the ambiguous
messages of RFC 9112 section 6.3 byte for byte. Each is answered 400 (501 for a coding
busbar does not implement) naming the rule, the connection is closed, and nothing of it
is published; a request smuggled behind one is never answered. Well-framed requests,
chunked and pipelined, still publish."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from spec.conftest import ROOT_KEY
from spec.integration.bus import web_env
from spec.integration.processes import free_port, running, wait_until, web_ready

pytestmark = pytest.mark.single_node  # the web's reader: one Redis is enough
AUTH = b"Authorization: Basic " + base64.b64encode(b"pub:") + b"\r\n"
EVENT = b'{"type": "create", "url": "https://o.test/1"}'
HEAD = b"POST /topics/orders HTTP/1.1\r\nHost: x\r\n" + AUTH


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


# each: the bytes, the gevent class's answer, the gthread class's (gunicorn's parser refuses
# most itself; busbar refuses the rest, and any chunked body: app/web/body.py)
SMUGGLED = HEAD + b"Content-Length: %d\r\n\r\n%s" % (len(EVENT), EVENT)  # a whole 2nd publish
REFUSED = [
    # both framing headers, either order: the chunked body framed, or the length
    (HEAD + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(EVENT), 400, 400),
    (HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + chunked(EVENT), 400, 400),
    (HEAD + b"Content-Length: %d\r\nContent-Length: 4\r\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Content-Length: %d, %d\r\n\r\n%s" % (len(EVENT), len(EVENT), EVENT), 400, 400),
    (HEAD + b"Content-Length: +%d\r\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Content-Length: %d.0\r\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Content-Length:  %dx\r\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked(EVENT), 501, 501),
    (HEAD + b"Transfer-Encoding: chunked, identity\r\n\r\n" + chunked(EVENT), 501, 400),
    (HEAD + b"Transfer-Encoding : chunked\r\n\r\n" + chunked(EVENT), 400, 400),
    (HEAD + b"X-A: a\r\n\tb\r\nContent-Length: %d\r\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD.replace(b"\r\n", b"\n") + b"Content-Length: %d\n\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Content-Length: %d\n\r\n%s" % (len(EVENT), EVENT), 400, 400),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x;\nx\r\n%s\r\n0\r\n\r\n" % (len(EVENT), EVENT),
     400, 411),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x zz\r\n%s\r\n0\r\n\r\n" % (len(EVENT), EVENT),
     400, 411),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\n0\r\n\r\n" % (len(EVENT), EVENT),
     400, 411),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nno colon\r\n\r\n"
     % (len(EVENT), EVENT), 400, 411),
]  # fmt: skip


@pytest.fixture(params=["gevent", "gthread"])
def web(request, redis_url: str, redis_client, tmp_path: Path) -> Iterator[str]:
    """A `busbar web` of each worker class, with a publisher and a subscriber."""
    port = free_port()
    env = web_env(redis_url, port, BUSBAR_WEB_WORKER_CLASS=request.param)
    base = f"http://127.0.0.1:{port}"
    with running(["web"], env, log=tmp_path / "web.log"):
        wait_until(lambda: web_ready(tmp_path / "web.log", port), what="busbar web to answer")
        with requests.Session() as http:
            for name in ("pub", "sub"):
                token = {"name": name, "token": name}
                assert http.post(f"{base}/api_tokens", json=token, auth=(ROOT_KEY, "")).ok
            subscription = {"topics": ["orders"], "callback": "https://sub.test/in", "max": 10}
            assert http.post(f"{base}/subscription", json=subscription, auth=("sub", "")).ok
        yield base


def exchange(base: str, request: bytes) -> bytes:
    """Everything the web sends back to these bytes, until it closes the connection (or
    stays silent for 3 s: a connection kept open is itself a finding)."""
    host, port = base.rsplit("/", 1)[1].split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=3) as sock:
        sock.sendall(request)
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except TimeoutError:
            got += b"<still open>"
    return got


def queued(base: str) -> int:
    (listing,) = requests.get(f"{base}/subscriptions", auth=("sub", ""), timeout=10).json()
    return int(listing["events"]["queued"])


def worker_class(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["web"])


def test_ambiguous_framing_is_refused_closed_and_publishes_nothing(
    web: str, request: pytest.FixtureRequest
):
    """Every case of REFUSED on one server (each on a connection of its own, a whole
    publish smuggled behind it): its status, one answer only, the connection closed,
    nothing queued."""
    gevent = worker_class(request) == "gevent"
    for request_bytes, on_gevent, on_gthread in REFUSED:
        status = on_gevent if gevent else on_gthread
        answer = exchange(web, request_bytes + SMUGGLED)
        case = (request_bytes[len(HEAD) :][:80], answer[:200])
        assert answer.startswith(b"HTTP/1.1 %d " % status), case
        assert answer.count(b"HTTP/1.1 ") == 1, case  # the smuggled publish never answered
        assert not answer.endswith(b"<still open>"), case
        assert queued(web) == 0, case
        if gevent:  # busbar's own answer, naming the rule
            error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
            assert error.startswith("request refused: "), error


def test_the_gevent_answer_names_the_rule(web: str, request: pytest.FixtureRequest):
    if worker_class(request) != "gevent":
        pytest.skip("gthread's refusals are gunicorn's own, without a body")
    answer = exchange(web, REFUSED[0][0])
    assert answer.split(b"\r\n\r\n", 1)[1] == (
        b'{"error": "request refused: Content-Length and Transfer-Encoding together"}'
    )
    assert b"\r\nConnection: close\r\n" in answer


def test_well_framed_requests_publish_chunked_and_pipelined(
    web: str, request: pytest.FixtureRequest
):
    """A chunked publish (with an extension and a trailer) and two pipelined ones on one
    kept-alive connection: three answers, three events. With gthread the chunked one is
    refused (411) and the connection closed: nothing is published."""
    body = (
        b"5;ext=1\r\n"
        + EVENT[:5]
        + b"\r\n%x\r\n%s\r\n0\r\nX-T: t\r\n\r\n"
        % (
            len(EVENT) - 5,
            EVENT[5:],
        )
    )
    request_bytes = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body + SMUGGLED
    closing = SMUGGLED.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    answer = exchange(web, request_bytes + closing)
    if worker_class(request) == "gthread":
        assert answer.startswith(b"HTTP/1.1 411 ") and answer.count(b"HTTP/1.1 ") == 1, answer
        assert queued(web) == 0
        answer = exchange(web, SMUGGLED + closing)
        assert answer.count(b"HTTP/1.1 204 ") == 2, answer
        assert queued(web) == 2
        return
    assert answer.count(b"HTTP/1.1 204 ") == 3, answer
    assert queued(web) == 3


def test_a_malformed_chunked_body_after_the_app_refused_closes_the_connection(web: str):
    """An unknown client is refused (401) before its body is read; the body's broken
    chunk is found while it is discarded, and the connection ends there: the request
    after it is not served."""
    stranger = HEAD.replace(base64.b64encode(b"pub:"), base64.b64encode(b"nobody:"))
    bad = stranger + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%sXX" % (len(EVENT), EVENT)
    answer = exchange(web, bad + SMUGGLED)
    assert answer.startswith((b"HTTP/1.1 401 ", b"HTTP/1.1 411 ")), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1, answer
    assert queued(web) == 0


def test_a_publish_as_clients_send_it_is_served(web: str):
    response = requests.post(f"{web}/topics/orders", data=EVENT, auth=("pub", ""), timeout=10)
    assert response.status_code == 204 and queued(web) == 1

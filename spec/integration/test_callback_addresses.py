"""Server-side request forgery, tried from outside as issue 23 item 1 tried it: real
`busbar web` and `busbar worker` with the production policy (no BUSBAR_CALLBACK_ALLOW),
a client subscribing callbacks at the bus's own host in every spelling, at names that
resolve there, and a subscription stored before the policy refused its address.

A refused address gets no packet: the listener behind it never sees a connection, and
a client learns `refused_address` whether a port listens there or not.

On one Redis (`layout_free`): what this adds is the address policy, decided before
any connection and touching no Redis key; a refused attempt is written to the attempt
log by the script every failure uses, run on a Redis Cluster in test_attempts.py and
the composition matrix (test_matrix.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving

pytestmark = pytest.mark.layout_free

PRODUCTION = {"BUSBAR_CALLBACK_ALLOW": "none"}  # what an operator runs: nothing opened

SPELLINGS = [
    "127.0.0.1:6379/x", "127.1", "0x7f000001", "2130706433", "0177.0.0.1", "[::1]",
    "[::ffff:127.0.0.1]", "0.0.0.0", "[::]", "10.1.2.3", "172.16.0.1", "192.168.1.1",
    "100.64.0.1", "[fc00::1]", "[fd12::1]", "localhost:8443/internal", "api.localhost",
    "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::]", "[::169.254.169.254]", "169.254.169.254",
]  # fmt: skip


@contextmanager
def listener(address: str) -> Iterator[socket.socket]:
    """A bare TCP listener: it sees a connection (a SYN answered) even if no request
    follows, which an HTTP subscriber would not report."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
    except OSError:
        pytest.skip(f"cannot listen on {address}")
    sock.listen(16)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def connections(sock: socket.socket) -> int:
    seen = 0
    while True:
        try:
            sock.accept()[0].close()
        except BlockingIOError:
            return seen
        seen += 1


def this_hosts_name() -> tuple[str, str]:
    """The machine's name and the address it resolves to, which is internal (loopback
    or a private range) on any test machine."""
    name = socket.gethostname()
    try:
        address = socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)[0][4][0]
    except OSError:
        pytest.skip(f"{name} does not resolve here")
    return name, address


def dead_letters(b: Bus, token: str, count: int) -> list[dict]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = b.call("GET", "/subscriber/deadletters", token).json()
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{count} dead letters expected, found {found}")


def test_every_spelling_of_an_internal_address_is_refused_at_subscribe(
    redis_url: str, redis_client, tmp_path: Path
) -> None:
    with bus(redis_url, tmp_path, workers=0, **PRODUCTION) as b:
        b.client("mallory")
        for spelling in SPELLINGS:
            body = {"topics": ["orders"], "callback": f"https://{spelling}"}
            answer = b.call("POST", "/subscription", "mallory", body)
            assert answer.status_code == 400, (spelling, answer.text)
            error = answer.json()["error"]
            assert error.startswith("callback must not point at"), error
            assert "BUSBAR_CALLBACK_" in error or "BUSBAR_ALLOW_LINK_LOCAL" in error, error
        assert b.call("GET", "/subscriptions", "mallory").json() == []
        # a public address and a name are taken (the name is judged at delivery)
        for callback in ("https://8.8.8.8/in", "https://orders.example.com/in"):
            body = {"topics": ["orders"], "callback": callback}
            assert b.call("POST", "/subscription", "mallory", body).status_code == 204


def test_a_name_resolving_inside_gets_no_packet_and_tells_nothing(
    redis_url: str, redis_client, tmp_path: Path
) -> None:
    """The machine's own name passes subscribe time; at delivery it resolves to an
    internal address, which is refused before connecting: the open port behind it and a
    closed one fail alike, as `refused_address`. Opening the name delivers."""
    name, address = this_hosts_name()
    with listener(address) as open_port, bus(redis_url, tmp_path, **PRODUCTION) as b:
        closed_port = open_port.getsockname()[1] + 1
        b.client("mallory"), b.client("pub")
        for token, port in (("mallory", open_port.getsockname()[1]), ("pub", closed_port)):
            body = {"topics": ["orders"], "callback": f"http://{name}:{port}/x",
                    "max": 1, "timeout": 0, "max_attempts": 1}  # fmt: skip
            assert b.call("POST", "/subscription", token, body).status_code == 204
        b.publish("pub", "orders", events(2))
        for token in ("mallory", "pub"):
            letters = dead_letters(b, token, 2)
            assert {letter["last_status"] for letter in letters} == {"refused_address"}
        assert connections(open_port) == 0  # no SYN reached the refused address

    (tmp_path / "opened").mkdir()
    with serving() as sub, bus(redis_url, tmp_path / "opened", BUSBAR_CALLBACK_ALLOW=name) as b:
        b.subscribe("pub", sub.url.replace("127.0.0.1", name), ["orders"], max=1, timeout=0)
        b.publish("pub", "orders", events(1, 5))
        sub.wait_for(1)  # the operator opened the name: delivered


QUICK_RETRIES = {"BUSBAR_RETRY_FIRST_MS": "100", "BUSBAR_MAX_BACKOFF_MS": "300",
                 "BUSBAR_CIRCUIT_FAILURES": "1000"}  # fmt: skip
TOKEN = "billing-token-never-logged-7f3a"


def test_a_subscription_stored_before_the_policy_is_named_and_held_until_opened(
    redis_url: str, redis_client, tmp_path: Path
) -> None:
    """Subscribed while loopback was open (as busbar dev opens it); the operator then
    runs with production defaults: the worker names the subscriber at start (by client
    name, never its token), its deliveries fail as refused_address and its events wait;
    opened again, every event arrives in order."""
    (tmp_path / "prod").mkdir(), (tmp_path / "opened").mkdir()
    with serving() as sub:
        with bus(redis_url, tmp_path, workers=0) as b:
            b.client("pub")
            named = {"name": "billing-service", "token": TOKEN}
            assert b.call("POST", "/api_tokens", ROOT_KEY, named).status_code == 201
            b.subscribe(TOKEN, sub.url, ["orders"], max=1, timeout=0)
            b.publish("pub", "orders", events(3))
        with bus(redis_url, tmp_path / "prod", **PRODUCTION, **QUICK_RETRIES) as b:
            log = tmp_path / "prod" / "worker0.log"
            named_at_start = "subscriber billing-service: callback host 127.0.0.1 is refused"
            assert named_at_start in log.read_text()
            wait_until(lambda: log.read_text().count("callback of billing-service refused") >= 3,
                       what="refused deliveries")  # fmt: skip
            assert sub.received == []
            assert b.subscription(TOKEN)["events"]["queued"] == 3
        assert TOKEN not in log.read_text()
        with bus(redis_url, tmp_path / "opened", **QUICK_RETRIES):  # loopback opened again
            sub.wait_for(3)
    assert [e["data"]["i"] for e in sub.delivered] == [0, 1, 2]

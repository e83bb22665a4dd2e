"""The callback client (the engine's, through its blocking bridge): no proxies from the
environment, no redirect followed, keep-alive that survives a server closing idle
connections, TLS by the public CAs or an operator's bundle, a bounded answer, and no
call to an address in a refused range, whatever name or spelling led there.

Loopback is refused by default (an internal range), so these tests serve on it and
open it where they need delivery to succeed, as `busbar dev` does: the check that
refuses it is the one that refuses any other internal or metadata address.
"""

from __future__ import annotations

import ipaddress
import ssl
import time
from dataclasses import replace

import pytest

from app.delivery.callback import Timeouts, client_options
from app.errors import CallbackRefused, Disconnected
from app.models.attempt_result import REFUSED_ADDRESS
from app.models.callback_policy import LOOPBACK_OPEN, Policy
from config.settings import Settings
from spec.app.delivery.blocking import BlockingClient
from spec.app.delivery.delivery_bench import Bench
from spec.app.delivery.driven import Driven
from spec.integration.subscriber import CLOSE, Subscriber, serving
from spec.integration.tls import make_internal_ca


def _bench(redis_client, keys, scripts, *, policy: Policy) -> Bench:
    bench = Bench(redis_client, keys, scripts)
    bench.delivery.close()
    bench.delivery = Driven(redis_client, keys, bench.settings, max_run=1, policy=policy)
    return bench


def test_proxy_variables_are_ignored(monkeypatch: pytest.MonkeyPatch):
    """A bus must not send callbacks, with their credentials, through whatever proxy the
    environment happens to name."""
    dead_proxy = "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with serving() as sub:
        http = BlockingClient(policy=LOOPBACK_OPEN)
        assert http.post(sub.url, b"[]", {"Content-Type": "application/json"}, "u") == 200
        assert sub.received[0].user == "u"


@pytest.mark.parametrize("idle_s", [0.0, 1.2])
def test_keep_alive_survives_a_server_that_closed_the_idle_connection(idle_s: float):
    """The subscriber hangs up after each answer. Reused at once, the POST meets the
    closed connection and is sent again on a new one; reused after a second's idle, the
    closed connection is noticed before sending. Either way the delivery succeeds, and
    the subscriber gets each request once."""
    answers = iter([200, 201])
    with serving(Subscriber(responder=lambda _: (next(answers), 0.0))) as sub:
        sub.close_after_answer = True
        http = BlockingClient(policy=LOOPBACK_OPEN)
        assert http.post(sub.url, b"[1]", {}, "u") == 200
        time.sleep(idle_s)
        assert http.post(sub.url, b"[2]", {}, "u") == 201
        http.close()
        assert [r.raw for r in sub.received] == [b"[1]", b"[2]"]


def test_a_new_connection_closed_without_an_answer_is_not_sent_again():
    """Only a kept-alive connection closed under the request earns a second try: a
    subscriber that hangs up on a new connection has failed, and gets the POST once."""
    with serving(Subscriber(responder=lambda _: (CLOSE, 0.0))) as sub:
        http = BlockingClient(policy=LOOPBACK_OPEN)
        with pytest.raises(Disconnected):
            http.post(sub.url, b"[1]", {}, "u")
        http.close()
        assert [r.raw for r in sub.received] == [b"[1]"]


def test_a_name_resolving_into_a_refused_range_is_a_failed_delivery(redis_client, keys, scripts):
    bench = _bench(redis_client, keys, scripts, policy=Policy())
    with serving() as sub:
        by_name = sub.url.replace("127.0.0.1", "localhost")  # a name passes subscribe time
        bench.subscribe(by_name, ["orders"], max=2, timeout=0, max_attempts=1)
        bench.publish(2)
        outcome = bench.run()
        assert (outcome.kind, outcome.status) == ("failed", REFUSED_ADDRESS)
        assert sub.received == []  # not a byte of the request was sent
    assert int(bench.field("health_points")) < 100
    dead = bench.client.lrange(keys.deadletters("sub"), 0, -1)
    assert len(dead) == 2 and all(f"|{REFUSED_ADDRESS}|".encode() in d for d in dead)


def test_the_allowlist_lets_the_worker_call_those_addresses(redis_client, keys, scripts):
    bench = _bench(redis_client, keys, scripts, policy=LOOPBACK_OPEN)
    with serving() as sub:
        bench.subscribe(sub.url.replace("127.0.0.1", "localhost"), ["orders"], max=1)
        bench.publish(1)
        assert bench.run().status == "200"
        assert len(sub.received) == 1


@pytest.mark.parametrize("allowed", [False, True])
def test_the_engine_builds_its_client_from_the_settings(settings: Settings, allowed: bool):
    options = client_options(replace(settings, allow_link_local_callbacks=allowed))
    assert bool(options["policy"].deny) is not allowed
    assert options["timeouts"] == Timeouts(settings.connect_timeout, settings.timeout)
    denied = ipaddress.ip_network("10.0.0.0/8")
    policy = client_options(replace(settings, callback_deny=(denied,)))["policy"]
    assert policy.deny == (denied,)
    opened = client_options(replace(settings, callback_allow=(denied, "a.internal")))["policy"]
    assert opened.allow == (denied, "a.internal")


def test_a_redirect_is_the_answer_not_followed():
    """A callback's 3xx must not send the batch, with its credentials, somewhere else."""
    with serving() as target, serving() as sub:
        sub.responder = lambda _: (302, 0.0)
        sub.headers_out = {"Location": target.url}
        http = BlockingClient(policy=LOOPBACK_OPEN)
        assert http.post(sub.url, b"[]", {}, "u") == 302
        http.close()
        assert len(sub.received) == 1 and target.received == []


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]",
     "localhost", "LocalHost.", "a.localhost"],
)  # fmt: skip
def test_every_spelling_of_a_refused_address_is_refused_before_connecting(host: str):
    with serving() as sub:
        port = sub.url.split(":")[2].split("/")[0]
        http = BlockingClient(policy=Policy())
        with pytest.raises(CallbackRefused):
            http.post(f"http://{host}:{port}/in", b"[]", {}, "u")
        http.close()
        assert sub.received == []


def test_only_a_few_kib_of_an_answer_are_read():
    """A callback answering a huge body does not make the worker read it: the status
    counts, the connection is dropped instead of drained."""
    with serving() as sub:
        sub.responder = lambda _: (200, 0.0)
        sub.body_out = b"x" * (8 * 1024 * 1024)
        http = BlockingClient(policy=LOOPBACK_OPEN)
        started = time.monotonic()
        assert http.post(sub.url, b"[]", {}, "u") == 200
        assert time.monotonic() - started < 2
        assert http.post(sub.url, b"[]", {}, "u") == 200  # a new connection, not a stuck one
        http.close()
        assert len(sub.received) == 2


def test_a_ca_bundle_verifies_a_subscriber_behind_an_internal_ca(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    ca = make_internal_ca(tmp_path)
    # What users tried first: the session ignores the environment, so this does nothing.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca.ca))
    with serving(tls=(ca.cert, ca.key)) as sub:
        assert sub.url.startswith("https://127.0.0.1:")
        public_cas = Settings.from_env({}).callback_verify
        with pytest.raises(ssl.SSLCertVerificationError):
            BlockingClient(policy=LOOPBACK_OPEN, verify=public_cas).post(sub.url, b"[]", {}, "u")
        internal = Settings.from_env({"BUSBAR_CA_BUNDLE": str(ca.ca)}).callback_verify
        http = BlockingClient(policy=LOOPBACK_OPEN, verify=internal)
        assert http.post(sub.url, b"[]", {}, "u") == 200
        assert len(sub.received) == 1
        unverified = BlockingClient(policy=LOOPBACK_OPEN, verify=False)
        assert unverified.post(sub.url, b"[]", {}, "u") == 200  # BUSBAR_SSL_VERIFY=0

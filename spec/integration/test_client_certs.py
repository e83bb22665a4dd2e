"""Mutual TLS as a receiver behind a mesh meets it: an https subscriber (its certificate
from a CA of the test's own, trusted by the bus through BUSBAR_CA_BUNDLE) that serves
only clients with a certificate that CA signed. A subscription's own certificate is
presented and its key never listed or stored in the clear; one without is refused
(`connection_error` in the attempt log, as TLS 1.3 refuses) until the bus-wide BUSBAR_CLIENT_CERT is
given, and then each presents its own over its own connections to the same origin.

On one Redis (`layout_free`): a subscription's own certificate is a cell of the
composition matrix (test_matrix.py), which delivers on a Redis Cluster too; what this
adds is TLS between the worker and the receiver."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from spec.integration.bus import bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.test_callback_headers import everything_stored
from spec.integration.tls import client_certificate, make_internal_ca

pytestmark = pytest.mark.layout_free


def test_a_subscriptions_certificate_and_the_buses_are_presented_each_on_its_own(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    ca = make_internal_ca(tmp_path / "ca")
    cert, key = client_certificate(ca, "billing")
    bus_cert, bus_key = client_certificate(ca, "busbar")
    (tmp_path / "bus.pem").write_text(bus_cert), (tmp_path / "bus.key").write_text(bus_key)
    server = (ca.cert, ca.key)
    with serving(tls=server, client_ca=ca.ca) as receiver, \
            bus(redis_url, tmp_path, BUSBAR_CA_BUNDLE=str(ca.ca)) as the_bus:  # fmt: skip
        the_bus.client("pub"), the_bus.client("billing"), the_bus.client("audit")
        the_bus.subscribe("billing", receiver.url, ["orders"], max=1, timeout=0,
                          client_cert={"cert": cert, "key": key})  # fmt: skip
        the_bus.subscribe("audit", receiver.url, ["orders"], max=1, timeout=0)
        the_bus.publish("pub", "orders", events(1))
        receiver.wait_for(1)
        assert [r.client_cn for r in receiver.received] == ["billing"]

        def refused() -> bool:
            found = the_bus.call("GET", "/subscriber/attempts", "audit").json()["attempts"]
            # TLS 1.3: the server's refusal comes after the client's handshake, as the
            # connection closed under the request (with 1.2, a failed handshake)
            return any(a["reason"] in ("tls_error", "connection_error") for a in found)

        wait_until(refused, 30, "audit's attempt refused for want of a certificate")
        assert len(receiver.received) == 1  # none of audit's got through
        listed = the_bus.subscription("billing")["client_cert"]
        assert listed["subject"] == "CN=billing" and len(listed["fingerprint"]) == 64
        assert set(listed) == {"subject", "not_after", "fingerprint", "set_at"}
        tried = the_bus.call("POST", "/subscription/test", "billing").json()
        assert tried["status"] == 200, tried  # the test call presents it too
        assert receiver.received[-1].client_cn == "billing" and receiver.received[-1].raw == b"[]"

        for worker in the_bus.workers:  # the bus's own certificate, for those without one
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        the_bus.start_worker(BUSBAR_CLIENT_CERT=str(tmp_path / "bus.pem"),
                             BUSBAR_CLIENT_KEY=str(tmp_path / "bus.key"),
                             BUSBAR_RETRY_FIRST_MS="100")  # fmt: skip
        the_bus.publish("pub", "orders", events(1, start=1))
        wait_until(lambda: len(receiver.delivered) >= 4, 60, "both subscribers' events")
        by_client = {(r.client_cn, r.events[0]["url"]) for r in receiver.received if r.events}
        assert ("busbar", "https://o.test/0") in by_client  # audit's, with the bus's
        assert ("billing", "https://o.test/1") in by_client  # billing's own, still
        assert {cn for cn, _ in by_client} == {"billing", "busbar"}

        stored = everything_stored(the_bus)
        listings = the_bus.call("GET", "/subscriptions", "billing").text
    secret = key.split("\n")[1].encode()  # a line of the key's base64
    logs = b"".join(p.read_bytes() for p in tmp_path.glob("*.log"))
    for place, text in [("Redis", stored), ("logs", logs), ("listing", listings.encode())]:
        assert secret not in text, f"the key is in the {place}"

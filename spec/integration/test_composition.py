"""Features as users combine them, end to end (`busbar web` and `busbar worker`, a real
https receiver, both layouts): the credentials a subscription gives its callback (a
write-only header, its own client certificate) with ordering keys at `concurrency` 1 and
above, where each partition delivers on its own (docs/tests.md, "The composition
matrix"). Each delivery carries them, every key stays in order, and the test call
answers what a delivery meets."""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving
from spec.integration.test_ordering_keys import KeyWatch, by_key, keyed
from spec.integration.tls import client_certificate, make_internal_ca

SECRET = "k-3f9a1c77e2"  # the write-only header's value


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_write_only_header_and_a_client_certificate_reach_every_partition(
    redis_url: str, tmp_path: Path, concurrency: int
):  # fmt: skip
    """At `concurrency` 4 each delivery came from a partition (`<token>#16.<p>`) whose
    secrets were looked up under the partition instead of the subscriber: none opened,
    nothing arrived, while the test call answered 204 (issue 53, defect 1)."""
    ca = make_internal_ca(tmp_path / "ca")
    cert, key = client_certificate(ca, "billing")
    watch = KeyWatch(0.02)
    receiver = Subscriber(responder=watch)
    with serving(receiver, tls=(ca.cert, ca.key), client_ca=ca.ca), \
            bus(redis_url, tmp_path, BUSBAR_CA_BUNDLE=str(ca.ca)) as b:  # fmt: skip
        b.client("pub"), b.client("billing")
        b.subscribe("billing", receiver.url, ["orders"], max=2, timeout=0,
                    concurrency=concurrency, client_cert={"cert": cert, "key": key},
                    headers={"X-Api-Key": {"value": SECRET, "secret": True}})  # fmt: skip
        sent = keyed(40, 8)
        b.publish("pub", "orders", sent)
        got = receiver.wait_for(40, timeout=60)

        assert by_key(got) == by_key(sent)  # every key in publish order
        assert watch.overlaps == []  # never one key in two deliveries at once
        batches = [r for r in receiver.received if r.events]
        assert {r.headers.get("X-Api-Key") for r in batches} == {SECRET}
        assert {r.client_cn for r in batches} == {"billing"}
        attempts = b.call("GET", "/subscriber/attempts", "billing").json()["attempts"]
        assert {a["outcome"] for a in attempts} == {"2xx"}, attempts

        tried = b.call("POST", "/subscription/test", "billing").json()
        assert tried["status"] == 200, tried
        last = receiver.received[-1]
        assert last.raw == b"[]" and last.client_cn == "billing"
        assert last.headers.get("X-Api-Key") == SECRET


def test_a_secret_that_does_not_open_is_its_own_outcome_named_without_the_token(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    """A worker without the key that sealed a header's secret: the attempt's outcome is
    `secret_unsealable` (not `connection`: no request was made) and a filter of its own;
    its body and the worker's log name the header, the key ids and what to do, the client
    by name, never its token or a partition, and never say "altered" (issue 53, defect
    9: it was a `connection` logged as "altered in Redis?" with the partition's token)."""
    token = "tok-billing-7f3e9a"
    with serving() as receiver, bus(redis_url, tmp_path, workers=0) as b:
        b.client("pub")
        made = b.call("POST", "/api_tokens", ROOT_KEY, {"name": "billing", "token": token})
        assert made.status_code == 201, made.text
        b.subscribe(token, receiver.url, ["orders"], max=1, timeout=0, concurrency=4,
                    headers={"X-Api-Key": {"value": SECRET, "secret": True}})  # fmt: skip
        b.start_worker(BUSBAR_SECRET_KEY="b" * 64)
        b.publish("pub", "orders", keyed(1, 1))

        def failed() -> list[dict]:
            path = "/subscriber/attempts?outcome=secret_unsealable"
            return b.call("GET", path, token).json()["attempts"]

        wait_until(failed, 30, "an attempt whose secret did not open")
        attempt = failed()[0]
        assert attempt["reason"] == "secret_unsealable" and attempt["status"] is None
        assert "header x-api-key" in attempt["body"], attempt
        assert "BUSBAR_SECRET_KEY_PREVIOUS" in attempt["body"], attempt
        assert receiver.received == []
        counted = b.call("GET", "/subscriptions", token).json()[0]
        assert counted["attempts"]["secret_unsealable"] >= 1, counted["attempts"]
        assert counted["attempts"]["connection"] == 0
    log = (tmp_path / "worker0.log").read_text()
    assert "delivery to billing not sent" in log and "header x-api-key" in log
    assert "altered" not in log and token not in log and SECRET not in log

"""The delivery scripts' replies read by name (app/delivery/tags.py) against what the real
scripts answer: begin_delivery's list and Delivering's fields must stay one for one."""

from __future__ import annotations

import pytest

from app.delivery import calls
from app.delivery.tags import Delivering, Tag
from spec.app.delivery.delivery_bench import JOB, WORKER, Bench


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts)


def test_a_begun_delivery_is_read_field_by_field_by_name(bench: Bench):
    bench.subscribe("http://127.0.0.1:9/in", ["orders"], max=2, timeout=0, event_ids=True)
    bench.client.hset(bench.keys.subscriber("sub"), "name", "billing")  # as the web sets it
    bench.publish(3)
    bench.take()
    call = calls.begin(bench.keys, "sub", WORKER, JOB, bench.clock(), "N0NCE", "5A17")
    begun = bench.scripts.run(call)
    assert begun.tag is Tag.DELIVER
    assert len(begun.fields) == len(Delivering._fields)  # one for one, or the read is off
    b = begun.delivering
    assert (b.callback, b.client, b.event_ids, b.failing, b.replay) == (
        b"http://127.0.0.1:9/in", b"billing", b"1", b"", b"",
    )  # fmt: skip
    assert len(b.entries) == 2 and int(b.attempts) == 0 and int(b.lane) >= 0
    # the salt of the one secret that signs now (no rotation under way)
    assert b.salts == [bench.client.hget(bench.keys.subscriber("sub"), "secret_salt")]
    assert (b.headers, b.auth, b.client_cert, b.transforms, b.transform_version) == (
        b"", b"", b"", b"", b"0",
    )  # fmt: skip

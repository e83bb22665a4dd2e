"""A subscriber behind an internal CA: `busbar worker` verifies its certificate against
BUSBAR_CA_BUNDLE (REQUESTS_CA_BUNDLE never reached the delivery session, which ignores
the environment), and without the bundle the delivery fails instead of going through
unverified.

On one Redis (`layout_free`): what this adds is the worker's TLS verification, which
no Redis key touches; delivery on a Redis Cluster runs in the composition matrix
(test_matrix.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.integration.bus import bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.tls import make_internal_ca

pytestmark = pytest.mark.layout_free


def test_deliveries_to_a_subscriber_behind_an_internal_ca(
    redis_url: str, redis_client, tmp_path: Path
):
    ca = make_internal_ca(tmp_path / "ca")
    with (
        serving(tls=(ca.cert, ca.key)) as sub,
        bus(redis_url, tmp_path, BUSBAR_CA_BUNDLE=str(ca.ca), REQUESTS_CA_BUNDLE="") as b,
    ):
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=5, timeout=0)
        b.publish("pub", "orders", events(5))
        assert len(sub.wait_for(5)) == 5
        assert sub.url.startswith("https://")

        b.workers[0].terminate()
        assert b.workers[0].wait(30) == 0
        b.start_worker(BUSBAR_CA_BUNDLE="", REQUESTS_CA_BUNDLE=str(ca.ca))
        b.publish("pub", "orders", events(5, start=5))
        wait_until(lambda: b.subscription("sub")["health_points"] < 100, what="a failed attempt")
        assert len(sub.delivered) == 5  # nothing went through unverified
    assert "failed: tls_error" in (tmp_path / "worker1.log").read_text()

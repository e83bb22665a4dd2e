"""POST /subscription/test as a subscriber meets it, against `busbar web` as a process
(gevent, the default worker class) and real receivers: one request of `[]` marked
`Busbar-Test: 1`, signed, with the subscription's own headers (a secret opened, never
answered) and its JWT, and the answer told back (status, first KiB of the body), or
why none came; nothing queued or counted. Root tries a subscriber by name.

On one Redis (`layout_free`): the test call is tried for every cell of the
composition matrix (test_matrix.py), on a Redis Cluster too; what this adds is the
answer to each way a receiver can fail it."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest
from standardwebhooks import Webhook

from spec.integration.bus import ROOT_KEY, bus
from spec.integration.processes import free_port
from spec.integration.subscriber import Subscriber, serving

pytestmark = pytest.mark.layout_free

SECRET = "sk-test-call-secret-5d1e"


def test_a_test_call_is_a_delivery_of_nothing_authenticated_as_deliveries_are(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    down = Subscriber(responder=lambda _: (503, 0.0), body_out=b"down for maintenance " * 80)
    with serving() as sub, serving(down) as broken, bus(redis_url, tmp_path) as the_bus:
        the_bus.client("billing"), the_bus.client("audit"), the_bus.client("gone")
        headers = {"X-Api-Key": {"value": SECRET, "secret": True}}
        the_bus.subscribe("billing", sub.url, ["orders"], headers=headers, auth={"type": "jwt"})
        answer = the_bus.call("POST", "/subscription/test", "billing")
        assert answer.status_code == 200, answer.text
        tried = answer.json()
        assert tried["status"] == 200 and tried["reason"] is None and tried["took_ms"] >= 0
        assert SECRET not in answer.text
        (request,) = sub.received
        assert request.raw == b"[]" and request.headers["Busbar-Test"] == "1"
        assert request.headers["X-Api-Key"] == SECRET
        token = request.headers["Authorization"].removeprefix("Bearer ")
        assert jwt.decode(token, options={"verify_signature": False})["aud"] == sub.url
        secret = the_bus.call("GET", "/subscriber/secret", "billing").json()["secret"]
        Webhook(secret).verify(request.raw, request.headers)  # signed as deliveries are
        listed = the_bus.subscription("billing")
        assert listed["events"]["sent"] == 0 and listed["events"]["queued"] == 0

        the_bus.subscribe("audit", broken.url, ["orders"])
        tried = the_bus.call("POST", "/subscribers/audit/test", ROOT_KEY).json()  # root, by name
        assert tried["status"] == 503 and len(tried["body"]) == 1024
        assert tried["body"].startswith("down for maintenance")
        assert broken.received[0].user == the_bus.subscription("audit")["uuid"]  # Basic

        the_bus.subscribe("gone", f"http://127.0.0.1:{free_port()}/events", ["orders"])
        tried = the_bus.call("POST", "/subscription/test", "gone").json()
        assert tried == {**tried, "status": None, "reason": "connection_refused", "body": ""}
        assert the_bus.call("POST", "/subscription/test", ROOT_KEY).status_code == 403
        nobody = the_bus.call("POST", "/subscribers/nobody/test", ROOT_KEY)
        assert nobody.status_code == 404

"""A subscription's SQS `destination` from outside: real `busbar web` and `busbar worker`,
a real SQS API (moto's server, signatures enforced), on one Redis and on a cluster
(docs/destinations.md).

Events reach a FIFO queue one message per event, each once, in order per key at
`concurrency` 4, a key's events in its message group, their ids as
MessageDeduplicationId; the secret access key is never listed or logged; the test call
reads the queue and sends nothing. The API cut and mended loses nothing; pause holds
events back; a queue that does not exist is a failed attempt (`no_queue`) that goes to
the dead letters, which replay into the queue once it exists; a refused key is
`auth_failed`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.test_destinations import QUICK, failed_twice, keyed, subscribe
from spec.sqs_server import REGION, SqsServer, sqs_server
from spec.tcp_forwarder import forwarder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqsServer]:
    with sqs_server(tmp_path_factory.mktemp("sqs")) as server:
        yield server


def destination(api: SqsServer, queue: str, **more: Any) -> dict[str, Any]:
    return {"type": "sqs", "queue_url": queue, "region": REGION,
            "access_key_id": api.key[0], "secret_access_key": api.key[1], **more}  # fmt: skip


def bodies(held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**json.loads(m["Body"]), "group": m["Attributes"].get("MessageGroupId"),
             "dedup": m["Attributes"].get("MessageDeduplicationId")} for m in held]  # fmt: skip


# moto's SQS under make test's load answers in seconds at times: a 2 s timeout would
# fail attempts for the machine's sake
SLOWER = {**QUICK, "BUSBAR_TIMEOUT": "10"}


class Queue:
    """What a queue received so far, read (and deleted) as a consumer reads it. Each
    event counted once: moto forgets a deleted message's deduplication id (SQS keeps it
    5 minutes), so a batch sent again after its first entries were read here would be
    stored again by moto alone. The test of "each once" reads the queue only at its end."""

    def __init__(self, api: SqsServer, url: str) -> None:
        self.api, self.url, self.held = api, url, []  # type: list[dict[str, Any]]

    def count(self) -> int:
        seen = {m["id"] for m in self.held}
        for m in bodies(self.api.received(self.url)):
            if m["id"] not in seen:
                seen.add(m["id"])
                self.held.append(m)
        return len(self.held)


def test_events_reach_a_fifo_queue_once_in_order_per_key_and_the_key_stays_sealed(
    redis_url: str, tmp_path: Path, api: SqsServer
):
    queue = Queue(api, api.queue(f"orders-{tmp_path.name[-12:]}.fifo"))
    with bus(redis_url, tmp_path, **SLOWER) as b:
        subscribe(b, "orders-queue", destination(api, queue.url),
                  concurrency=4, max=10, timeout=0)  # fmt: skip
        tried = b.call("POST", "/subscription/test", "orders-queue").json()
        assert tried["status"] == 200 and "the queue exists" in tried["body"], tried
        assert queue.count() == 0  # the test call sent nothing
        for start in range(0, 200, 50):
            b.publish("orders-queue", "orders", keyed(50, 8, start))
        sent = lambda: b.subscription("orders-queue")["events"]["sent"]  # noqa: E731
        wait_until(lambda: sent() == 200, 60, "200 events acknowledged")
        held = bodies(api.received(queue.url))  # read once all was sent: moto's dedup holds
        assert len(held) == 200  # each once
        assert [m["dedup"] for m in held] == [m["id"] for m in held]
        for k in range(8):
            mine = [m["data"]["i"] for m in held if m["key"] == f"k{k}"]
            assert mine == list(range(k, 200, 8)), f"k{k} out of order"
            assert {m["group"] for m in held if m["key"] == f"k{k}"} == {f"k{k}"}
        listed = b.subscription("orders-queue")
        shown = listed["destination"]
        assert shown["secret_access_key"]["secret"] is True
        assert (shown["queue_url"], shown["region"]) == (queue.url, REGION)
        assert shown["access_key_id"] == api.key[0] and shown["message_group"] == "{key}"
        assert listed["events"]["sent"] == 200
        assert api.key[1] not in json.dumps(listed)
        assert api.key[1] not in json.dumps(b.call("GET", "/subscriptions", ROOT_KEY).json())
    for log in tmp_path.glob("*.log"):
        assert api.key[1] not in log.read_text(errors="replace"), log.name


def test_the_api_cut_then_mended_loses_nothing_and_pause_holds_events(
    redis_url: str, tmp_path: Path, api: SqsServer
):
    queue = Queue(api, api.queue(f"resilient-{tmp_path.name[-12:]}.fifo"))
    with forwarder(("127.0.0.1", api.port)) as gate, bus(redis_url, tmp_path, **SLOWER) as b:
        subscribe(b, "resilient", destination(api, queue.url, endpoint=gate.url), max=5,
                  timeout=0)  # fmt: skip
        b.publish("resilient", "orders", keyed(10, 2))
        wait_until(lambda: queue.count() == 10, 30, "the first 10")
        gate.cut()
        b.publish("resilient", "orders", keyed(10, 2, 10))
        failed_twice(b, "resilient")
        gate.mend()
        wait_until(lambda: queue.count() == 20, 60, "all 20 once it is back")
        assert b.call("POST", "/subscriber/pause", "resilient").status_code == 200
        b.publish("resilient", "orders", keyed(5, 2, 20))
        b.job_settled("resilient")
        assert queue.count() == 20  # paused: nothing sent
        assert b.call("POST", "/subscriber/resume", "resilient").status_code == 200
        wait_until(lambda: queue.count() == 25, 30, "the 5 held while paused")
        for k in range(2):
            mine = [m["data"]["i"] for m in queue.held if m["key"] == f"k{k}"]
            assert mine == list(range(k, 25, 2))
        assert len({m["id"] for m in queue.held}) == 25


def test_no_queue_goes_to_the_dead_letters_which_replay_into_the_queue(
    redis_url: str, tmp_path: Path, api: SqsServer
):
    name = f"early-{tmp_path.name[-12:]}.fifo"
    url = f"{api.url}/123456789012/{name}"  # moto's account, the queue not made yet
    with bus(redis_url, tmp_path, **SLOWER) as b:
        subscribe(b, "early", destination(api, url), max_attempts=1, timeout=0)
        tried = b.call("POST", "/subscription/test", "early").json()
        assert tried["status"] is None and tried["reason"] == "no_queue", tried
        b.publish("early", "orders", keyed(3, 1))

        def dead() -> list[dict[str, Any]]:
            return b.call("GET", "/subscriber/deadletters", "early").json()

        wait_until(lambda: len(dead()) == 3, 30, "3 dead letters")
        assert {d["last_status"] for d in dead()} == {"no_queue"}
        queue = Queue(api, api.queue(name))
        assert queue.url == url
        assert b.call("POST", "/subscriber/deadletters/replay", "early").status_code == 202
        wait_until(lambda: queue.count() == 3, 30, "the replayed 3")
        assert [m["data"]["i"] for m in queue.held] == [0, 1, 2]
        wrong = destination(api, url, secret_access_key="not-the-secret-key")
        subscribe(b, "wrong-key", wrong, max_attempts=1)
        refused = b.call("POST", "/subscription/test", "wrong-key").json()
        assert refused["reason"] == "auth_failed", refused
        body = {"topics": ["orders"], "destination": {**wrong, "region": "eu west"}}
        answer = b.call("POST", "/subscription", "wrong-key", body)
        assert answer.status_code == 400 and "destination.region" in answer.text

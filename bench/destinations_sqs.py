"""Amazon SQS as bench.destinations measures it (a Target of bench.destinations_bus):
moto's SQS server as spec/sqs_server.py runs it (loopback, signatures enforced, an IAM
key of its own) behind spec/tcp_forwarder.py's forwarder, and this process's side of
it: a drain per queue, and one aiobotocore client on an event loop of its own.

Why a forwarder: moto keeps its queues in memory, so killing it would lose what it
holds. The outage is the forwarder cut (every connection through it reset, new ones
refused) and mended OUTAGE_S later on the same port. The subscriber's destination and
the baselines both reach moto through it (`endpoint`), so both pay its relay.

Why a drain: moto 5.2 walks every message a queue holds, several times, for each
message it is sent or hands out (it computes the queue's attributes each time), so a
call's cost grows with the queue: ten into a FIFO queue holding 500 take ~0.5 s, and
5,000 events would be mostly moto's arithmetic. Measurement `n`'s FIFO queue
`q<n>.fifo` is read as it fills (ten received, then deleted, on a thread of its own,
straight to moto), for busbar and the baselines alike: it stays near empty, and what
was read is kept. When a message was stored is its SentTimestamp (ms). The price:
moto forgets a deleted message's deduplication id, which SQS keeps for 5 minutes, so a
batch sent again after its first entries were drained stores them twice here.

The baselines use aiobotocore as the worker does (botocore's retries off): for
`max: 100`, the messages ten to a SendMessageBatch, each call awaited before the next;
for `max: 1`, one SendMessage per message, each awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from bench.destinations_bus import MAX_1, MAX_100, Stored
from spec.sqs_server import REGION, SqsServer
from spec.tcp_forwarder import Forwarder

PER_CALL = 10  # SendMessageBatch's most entries, as app/delivery/sqs_publisher.py sends


class Drain(threading.Thread):
    """A queue read as it fills: up to ten received (long polling), then deleted."""

    def __init__(self, server: SqsServer, url: str) -> None:
        super().__init__(daemon=True)
        self.sqs, self.url = server.client(), url
        self.held: list[Stored] = []
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.take(wait=1)
            except Exception:  # moto busy or slow: read again, as a consumer would
                time.sleep(0.1)

    def take(self, wait: int) -> int:
        answer = self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=PER_CALL, WaitTimeSeconds=wait,
            AttributeNames=["All"], MessageAttributeNames=["All"],
        )  # fmt: skip
        messages = answer.get("Messages", [])
        if messages:
            self.held += [stored(len(self.held) + i, m) for i, m in enumerate(messages)]
            handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                       for i, m in enumerate(messages)]  # fmt: skip
            self.sqs.delete_message_batch(QueueUrl=self.url, Entries=handles)
        return len(messages)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)

    def finish(self) -> list[Stored]:
        """Everything the queue held: the thread stopped, then what is left taken."""
        self.stop()
        while self.take(wait=0):
            pass
        return self.held


def stored(seq: int, message: dict[str, Any]) -> Stored:
    attributes = message["Attributes"]
    return Stored(
        seq, attributes.get("MessageGroupId", ""), attributes.get("MessageDeduplicationId", ""),
        message["Body"].encode(), int(attributes["SentTimestamp"]) / 1e3,
        {k: v.get("StringValue", "") for k, v in message.get("MessageAttributes", {}).items()},
    )  # fmt: skip


def entry(message: Stored) -> dict[str, Any]:
    """A message as busbar sends it to a FIFO queue (sqs_publisher.entries)."""
    made: dict[str, Any] = {"MessageBody": message.data.decode(),
                            "MessageGroupId": message.subject,
                            "MessageDeduplicationId": message.msg_id}  # fmt: skip
    if message.headers:
        made["MessageAttributes"] = {name: {"DataType": "String", "StringValue": value}
                                     for name, value in message.headers.items()}  # fmt: skip
    return made


class Sqs:
    name = "Amazon SQS"
    baseline = "aiobotocore SendMessageBatch loop (baseline)"

    def __init__(self, server: SqsServer, gate: Forwarder) -> None:
        self.baselines = {MAX_1: "aiobotocore SendMessage loop (baseline)", MAX_100: self.baseline}
        self.server, self.gate = server, gate
        self.loop = asyncio.new_event_loop()
        self.client: Any = None
        self.drains: dict[int, Drain] = {}
        self.urls: dict[int, str] = {}

    async def _client(self) -> Any:
        if self.client is None:
            config = AioConfig(retries={"total_max_attempts": 1}, max_pool_connections=16)
            self.client = await get_session().create_client(
                "sqs", region_name=REGION, endpoint_url=self.gate.url, config=config,
                aws_access_key_id=self.server.key[0], aws_secret_access_key=self.server.key[1],
            ).__aenter__()  # fmt: skip
        return self.client

    def close(self) -> None:
        for drain in self.drains.values():
            drain.stop()
        if self.client is not None:
            self.loop.run_until_complete(self.client.close())
        self.loop.close()

    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def fresh(self, n: int) -> None:
        self.urls[n] = self.server.queue(f"q{n}.fifo")
        self.drains[n] = Drain(self.server, self.urls[n])

    def destination(self, n: int) -> dict[str, Any]:
        return {"type": "sqs", "queue_url": self.urls[n], "region": REGION,
                "endpoint": self.gate.url, "access_key_id": self.server.key[0],
                "secret_access_key": self.server.key[1]}  # fmt: skip

    def remove(self, n: int) -> None:
        self.drains.pop(n).stop()
        self.server.client().delete_queue(QueueUrl=self.urls.pop(n))

    def count(self, n: int) -> int:
        return len(self.drains[n].held)

    def span(self, n: int, count: int) -> tuple[float, float]:
        """When the first and the count-th message were stored (SentTimestamp)."""
        stamps = sorted(m.at for m in self.drains[n].held)[:count]
        return stamps[0], stamps[-1]

    def read(self, n: int) -> list[Stored]:
        """Every message the queue held, in the order it handed them out (a group's in
        its order); the drain stopped."""
        return self.drains[n].finish()

    def publish_loop(self, n: int, messages: list[Stored], baseline: str) -> float:
        """The baseline `baseline`: the messages to q<n>.fifo with the same groups,
        deduplication ids and attributes, ten to a SendMessageBatch or one to a
        SendMessage, each call awaited before the next. Returns this thread's CPU
        seconds (the drain and the forwarder run on others)."""
        url, single = self.urls[n], baseline == self.baselines[MAX_1]
        client = self.loop.run_until_complete(self._client())

        async def loop() -> None:
            if single:
                for m in messages:
                    await client.send_message(QueueUrl=url, **entry(m))
                return
            for at in range(0, len(messages), PER_CALL):
                call = messages[at : at + PER_CALL]
                entries = [{"Id": str(i), **entry(m)} for i, m in enumerate(call)]
                answer = await client.send_message_batch(QueueUrl=url, Entries=entries)
                if answer.get("Failed"):
                    raise RuntimeError(f"the baseline's call refused: {answer['Failed']}")

        began = time.thread_time()
        self.loop.run_until_complete(loop())
        return time.thread_time() - began

    def kill(self) -> None:
        self.gate.cut()  # every connection reset, new ones refused: moto keeps its queues

    def restart(self) -> None:
        self.gate.mend()

    def arrivals(self, n: int, held: list[Stored], since: float) -> tuple[float, float]:
        """When the first message at or after `since`, and the last, were stored."""
        del n  # the stamps are in the messages
        return min((m.at for m in held if m.at >= since), default=since), max(m.at for m in held)


@contextlib.contextmanager
def sqs_broker(work: Path) -> Iterator[Sqs]:
    """moto's SQS server (its log under `work`) behind a forwarder, and this process's
    side of it; the server stopped on the way out."""
    for name in ("botocore", "aiobotocore"):  # an outage on purpose: no tracebacks
        logging.getLogger(name).setLevel(logging.CRITICAL)
    server = SqsServer(work / "moto.log")
    gate = Forwarder(("127.0.0.1", server.port))
    try:
        server.start()
        gate.mend()
        with contextlib.closing(Sqs(server, gate)) as broker:
            yield broker
    finally:
        gate.cut()
        server.stop()

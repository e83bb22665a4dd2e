"""The service-level test rig: ingest, queue and the engine's delivery steps
(spec/app/delivery/driven.py) wired on one real server and a real HTTP subscriber, as a
worker's slot has them (tests of delivery, signing, coalescing,
dead letters and the console use it). Its clock is set by the test (spec/clock.py): a test
moves it past a backoff, a TTL or into a new second instead of sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from app import codec
from app.lua import Scripts
from app.models.callback_policy import Policy
from app.models.event import Event
from app.models.keys import Keys
from app.models.queue import JobQueue, promote_all, take_first
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.parsers import allowlist
from config.settings import DEV_CALLBACK_ALLOW, Settings
from spec.app.delivery.driven import Driven
from spec.clock import SetClock
from spec.conftest import ROOT_KEY
from spec.integration.subscriber import Subscriber, serving

WORKER = "w/0"
JOB = codec.pack_job("batch", ["sub"])
WOKEN_EARLY_MS = 10**9  # run() promotes a job scheduled up to this far ahead


class Bench:
    """Ingest, queue and delivery wired on one real server, as a worker thread has them."""

    def __init__(
        self, client: redis.Redis, keys: Keys, scripts: Scripts, max_run: int = 1, **settings
    ) -> None:
        self.clock = SetClock()
        opened = allowlist(DEV_CALLBACK_ALLOW)  # subscribers serve on this machine, as in dev
        self.settings = Settings(
            allow_http=True, **{"root_key": ROOT_KEY, "callback_allow": opened, **settings}
        )
        self.policy = Policy.of(self.settings)
        self.client, self.keys, self.scripts = client, keys, scripts
        self.store = SubscriberStore(client, keys, scripts)
        self.ingest = Ingest(client, keys, scripts, self.settings)
        TokenStore(client, keys).create("pub", "pub")
        self.queue = JobQueue(client, keys, scripts, "main", keys.shard_of("sub"))
        # the engine's own steps (loopback allowed here, the total deadline enforced); one
        # batch a run unless asked: most tests look at one step of the job at a time
        self.delivery = Driven(client, keys, self.settings, max_run=max_run, clock=self.clock)

    def subscribe(self, callback: str, topics: list, **extra) -> None:
        body = {"topics": topics, "callback": callback, **extra}
        self.store.subscribe(
            "sub",
            parse_subscription(body, allow_http=True, policy=self.policy),
            self.clock(),
        )

    def publish(
        self, n: int, type_: str = "create", start: int = 0, topic: str = "orders", pad: int = 0
    ) -> None:
        """`pad`: that many more bytes of data per event."""
        now = self.clock()
        data = [{"i": i, "p": "x" * pad} if pad else {"i": i} for i in range(start, start + n)]
        events = [Event(type_, f"https://o.test/{d['i']}", now, d) for d in data]
        self.ingest.publish(topic, "pub", events, now)

    def run(self):
        """Take the subscriber's job as a worker would, whatever its state, and run it:
        through the job state machine, as if its due time had come (a job in backoff too,
        so a test sees what its begin answers when woken early: `wait`)."""
        self.take()
        return self.delivery.run("sub", WORKER, JOB)

    def take(self) -> None:
        """run()'s first half: the job in WORKER's pending list, by the state machine."""
        now = self.clock()
        self.queue.push(JOB, now)  # absent: instant now; else as it is
        promote_all([self.queue], now + WOKEN_EARLY_MS)
        if take_first([self.queue], WORKER) is None:
            raise AssertionError("the subscriber's job is held by a worker: a step left it")

    def field(self, name: str) -> str | None:
        value = self.client.hget(self.keys.subscriber("sub"), name)
        return None if value is None else value.decode()

    def job_states(self) -> list[str]:
        return self.queue.states(JOB)


@contextmanager
def refused_failed_delivered(bench: Bench, body: bytes) -> Iterator[Subscriber]:
    """Three attempts on one batch, made by the real scripts: a subscriber named
    `Subscriber Service` (token `sub`, max 2) with 3 events queued is refused a
    connection, then answered 500, then 200 with `body`. Yields the subscriber serving
    (it answers 200 from then on; the third event's batch is still queued)."""
    bench.client.hset(bench.keys.tokens, "sub", "Subscriber Service")
    bench.subscribe("http://127.0.0.1:9/nobody", ["orders"], max=2, timeout=0)
    bench.publish(3)
    assert bench.run().status == "connection_refused"
    answers = iter([500])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        sub.body_out = body
        bench.subscribe(sub.url, ["orders"], max=2, timeout=0)
        for kind in ("failed", "delivered"):
            bench.clock.advance(10)
            assert bench.run().kind == kind
        yield sub

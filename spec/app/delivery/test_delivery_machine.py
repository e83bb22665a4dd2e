"""The delivery state machine under fencing, driven step by step by two worker threads on
the real server (the scripts need cmsgpack, which fakeredis lacks).

Each worker acquires, begins, answers (ack or fail), and may be taken for dead while it
holds a job or has a batch in flight: its process is scrubbed, another worker takes the
job over, and later the first one wakes up and carries on with what it believed it
held, or replays a script call whose reply it never saw. Whatever the order:
- a subscriber with queued batches has exactly one delivery job, in one state; never two;
  paused (the paused form): at most one, never scheduled, and no delivery begins for it
  (the one in flight when it was paused finishes); resumed, exactly one again;
- no event is lost or counted twice: every event added is delivered, dead or queued;
- a stale step changes nothing: it is answered `lost` (or `stale`) and no batch moves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from app import codec
from app.delivery.flight import Flight, Outcome
from app.errors import JobLost
from app.lua import Scripts
from app.models.attempt_result import answered
from app.models.event import Event
from app.models.keys import LANES, Keys
from app.models.pausing import Pausing
from app.models.queue import JobQueue, promote_all, take_first
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.counters import merged, totals
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.delivery.driven import Driven
from spec.budget import MANY_EXAMPLES, examples

SUBSCRIBERS = ["s0", "s1"]  # on shards 2 and 0 of 4
WORKERS = ["a.1.x/0", "b.2.y/0"]
JOBS = {s: codec.pack_job("batch", [s]) for s in SUBSCRIBERS}
SCRUB_MS = 60_000


@dataclass
class Belief:
    """What a worker thread believes it holds; a scrubbed worker keeps believing it."""

    job: bytes | None = None
    flight: Flight | None = None


def machine(client: redis.Redis) -> type:
    class DeliveryMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            client.flushdb()
            self.keys, scripts = Keys("t:", 4), Scripts(client)
            cfg = Settings(
                key_prefix="t:",
                shards=4,
                max_backoff_ms=1,
                scrub_after_ms=SCRUB_MS,
                delivery_log=False,
            )
            self.queues = [JobQueue(client, self.keys, scripts, "main", n) for n in range(4)]
            self.queue_of = {sub: self.queues[self.keys.shard_of(sub)] for sub in SUBSCRIBERS}
            self.ingest = Ingest(client, self.keys, scripts, cfg)
            self.delivery = Driven(client, self.keys, cfg)  # the engine's own steps
            TokenStore(client, self.keys).create("pub", "pub")
            store = SubscriberStore(client, self.keys, scripts)
            for sub in SUBSCRIBERS:
                body = {"topics": ["orders"], "callback": "https://s.test/", "max": 2, "timeout": 0}
                store.subscribe(sub, parse_subscription(body, allow_http=False), self.now())
            self.beliefs = {w: Belief() for w in WORKERS}
            self.published = 0
            self.pausing = Pausing(client, self.keys, scripts)
            self.paused: set[str] = set()
            for worker in WORKERS:
                self.beat(worker, alive=True)

        def teardown(self) -> None:
            self.delivery.close()

        def now(self) -> int:
            return int(time.time() * 1000)

        def beat(self, worker: str, *, alive: bool) -> None:
            stamp = int(client.time()[0]) * 1000 if alive else 0
            for queue in self.queues:
                client.hset(queue.place.workers, worker.split("/")[0], stamp)

        @rule(n=st.integers(1, 3))
        def publish(self, n: int) -> None:
            start = self.published
            events = [
                Event("create", f"https://o.test/{i}", self.now(), None)
                for i in range(start, start + n)
            ]
            self.ingest.publish("orders", "pub", events, self.now())
            self.published += n

        @rule(sub=st.sampled_from(SUBSCRIBERS), pause=st.booleans())
        def pause_or_resume(self, sub: str, pause: bool) -> None:
            if pause:
                self.pausing.pause(sub, "root", self.now())
                self.paused.add(sub)
            else:
                self.pausing.resume(sub, "root", self.now())
                self.paused.discard(sub)

        def began(self, flight: Flight | Outcome | None) -> None:
            """A delivery that begins now is never a paused subscriber's."""
            if isinstance(flight, Flight):
                assert flight.pid not in self.paused, flight.pid

        @rule()
        def promote(self) -> None:
            time.sleep(0.002)  # past any 1 ms backoff
            promote_all(self.queues, self.now() + 5)

        @rule(worker=st.sampled_from(WORKERS), start=st.integers(0, 3), begins=st.booleans())
        def acquire(self, worker: str, start: int, begins: bool) -> None:
            """A worker thread's sweep of the shards, from any one of them; or the sweep
            that begins the delivery of the job it takes in the same step."""
            belief = self.beliefs[worker]
            if belief.job is not None:
                return
            queues = [*self.queues[start:], *self.queues[:start]]
            if not begins:
                found = take_first(queues, worker)
                belief.job = None if found is None else found[1]
                return
            taken = self.delivery.take(queues, worker)
            if taken is not None:
                self.began(taken.flight)
            if taken is not None and isinstance(taken.flight, Flight):
                belief.job, belief.flight = taken.job, taken.flight

        @rule(worker=st.sampled_from(WORKERS), replayed=st.booleans())
        def begin(self, worker: str, replayed: bool) -> None:
            """A replayed begin is sent twice and only its second reply is seen."""
            belief = self.beliefs[worker]
            if belief.job is None or belief.flight is not None:
                return
            token = codec.unpack_job(belief.job)[1][0]
            result: Flight | Outcome | None = None
            for _ in range(2 if replayed else 1):
                try:
                    result = self.delivery.begin(token, worker, belief.job)
                except JobLost:
                    result = None
                self.began(result)
            if isinstance(result, Flight):
                belief.flight = result
            else:
                belief.job = None  # settled by the script (wait, idle, gone), or lost

        @rule(
            worker=st.sampled_from(WORKERS),
            ok=st.booleans(),
            replayed=st.sampled_from(["", "same", "other"]),
            go_on=st.booleans(),
            sweep=st.sampled_from([None, 0, 1, 2, 3]),
        )
        def answer(
            self, worker: str, ok: bool, replayed: str, go_on: bool, sweep: int | None
        ) -> None:
            """An ack may go on with the subscriber's next due batch in the same step:
            the worker then still holds the job, with that batch in flight. An ack that
            ends the job's run may sweep the shards (from any one) for the worker's next
            job and begin it in the same step: the worker then holds that job. Once the
            flight is settled, its answer again, the same (`same`) or the other way
            (`other`: an ack after its fail, a fail after its ack), changes nothing."""
            belief = self.beliefs[worker]
            flight = belief.flight
            if flight is None:
                return
            status = answered(200) if ok else answered(500)
            before = self.snapshot()
            after = None
            taken_after: tuple[bytes, Flight] | None = None
            try:
                queues = [] if sweep is None else [*self.queues[sweep:], *self.queues[:sweep]]
                outcome, after = self.delivery.finish_and_next(flight, status, go_on, queues)
                if outcome.taken is not None:
                    assert ok and not isinstance(after, Flight)
                    taken = outcome.taken.flight
                    self.began(taken)
                    if isinstance(taken, Flight):
                        taken_after = (outcome.taken.job, taken)
                if outcome.kind == "stale":
                    assert self.snapshot()[1:] == before[1:]  # no batch touched
            except JobLost:
                assert self.snapshot() == before  # nothing changed at all
            belief.job = belief.flight = None
            self.began(after)
            if isinstance(after, Flight):
                assert ok and go_on
                belief.job, belief.flight = flight.job, after
            elif taken_after is not None:
                belief.job, belief.flight = taken_after
            if replayed:
                again = status if replayed == "same" else (answered(500) if ok else answered(200))
                assert self._stale_step(lambda: self.delivery.finish(flight, again))

        @rule(worker=st.sampled_from(WORKERS))
        def taken_for_dead(self, worker: str) -> None:
            """Paused past the scrub window: another worker scrubs its jobs. It keeps its
            beliefs, and its heartbeat comes back when it wakes up."""
            self.beat(worker, alive=False)
            for queue in self.queues:
                queue.scrub(worker, SCRUB_MS)
            self.beat(worker, alive=True)

        @rule(worker=st.sampled_from(WORKERS))
        def recovers(self, worker: str) -> None:
            """What a thread does after `lost` or a Redis error: gives back its own lists."""
            for queue in self.queues:
                queue.scrub(worker)
            self.beliefs[worker] = Belief()

        def _stale_step(self, step: object) -> bool:
            before = self.snapshot()
            try:
                kind = step().kind  # type: ignore[operator]
            except JobLost:
                kind = "lost"
            return kind in ("lost", "stale") and self.snapshot()[1:] == before[1:]

        def ids(self, sub: str, lane: int) -> list[str]:
            return [i.decode() for i in client.lrange(self.keys.lane(sub, lane), 0, -1)]

        def snapshot(self) -> tuple:
            """Job states, then every batch (id, attempts, events) per subscriber."""
            batches = []
            for sub in SUBSCRIBERS:
                for lane in LANES:
                    for batch_id in self.ids(sub, lane):
                        batches.append(client.lrange(self.keys.batch(sub, batch_id), 0, -1))
            states = tuple(tuple(self.queue_of[sub].states(JOBS[sub])) for sub in SUBSCRIBERS)
            return (states, batches)

        @invariant()
        def one_job_per_subscriber_with_batches(self) -> None:
            for sub, job in JOBS.items():
                states = self.queue_of[sub].states(job)
                queued = any(client.llen(self.keys.lane(sub, lane)) for lane in LANES)
                assert len(states) <= 1, (sub, states)
                if sub in self.paused:  # taken out of line; a scrub may give it back
                    assert "scheduled" not in states, (sub, states)
                elif queued:
                    assert len(states) == 1, (sub, states)

        @invariant()
        def every_event_accounted_for(self) -> None:
            counters = {k.decode(): int(v) for k, v in totals(client, self.keys).items()}
            queued = sum(int(v) for v in merged(client, self.keys, "event_gauge").values())
            entries = sum(
                max(0, client.llen(self.keys.batch(sub, batch_id)) - 3)
                for sub in SUBSCRIBERS
                for lane in LANES
                for batch_id in self.ids(sub, lane)
            )
            assert queued == entries
            assert counters.get("events.added", 0) == (
                counters.get("delivery.events", 0) + counters.get("events.deadlettered", 0) + queued
            )
            assert counters.get("events.added", 0) == self.published * len(SUBSCRIBERS)

    return DeliveryMachine


@MANY_EXAMPLES
def test_delivery_state_machine_with_paused_workers_replays_and_paused_subscribers(
    redis_url: str,
):
    client = redis.Redis.from_url(redis_url)
    run_state_machine_as_test(
        machine(client),
        settings=settings(max_examples=examples(40), stateful_step_count=40, deadline=None),
    )

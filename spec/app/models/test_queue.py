"""The job queue as a state machine: a job is in exactly one state, never two copies,
never lost, whatever the order of push, promote, acquire, ack, nack and scrub, and
whatever a worker that was scrubbed does when it wakes up, or a call that is replayed.

Thousands of steps run on fakeredis (pure queue logic, Lua through lupa); the same
machine runs a shorter course on the real server, where BLMOVE really blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import fakeredis
import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from app import codec
from app.lua import Scripts
from app.models import job_calls
from app.models.keys import Keys
from app.models.queue import JobQueue
from spec.budget import MANY_EXAMPLES, examples

JOBS = [codec.pack_job("batch", [f"s{i}"]) for i in range(4)]
WORKERS = ["w1/0", "w1/1", "w2/0"]
NOW = 1_000_000


def machine(make_client: Callable[[], redis.Redis], acquire_timeout: float) -> type:
    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            client = make_client()
            client.flushdb()
            self.client, self.keys = client, Keys("t:")
            self.queue = JobQueue(client, self.keys, Scripts(client))
            self.model: dict[bytes, object] = {}  # job -> "scheduled" | "instant" | worker
            self.due: dict[bytes, int] = {}
            self.now = NOW

        @rule(job=st.sampled_from(JOBS), delay=st.sampled_from([0, 5, 50]))
        def push(self, job: bytes, delay: int) -> None:
            pushed = self.queue.push(job, self.now, self.now + delay)
            assert pushed == (job not in self.model)
            if pushed:
                self.model[job] = "instant" if delay == 0 else "scheduled"
                self.due[job] = self.now + delay

        @rule(step=st.sampled_from([1, 10, 100]))
        def promote(self, step: int) -> None:
            self.now += step
            q = self.queue
            moved = q.scripts.run(job_calls.promote([(q.place, q.name)], self.now, 1000)).moved
            due = [j for j, s in self.model.items() if s == "scheduled" and self.due[j] <= self.now]
            assert moved == len(due)
            for job in due:
                self.model[job] = "instant"

        @rule(worker=st.sampled_from(WORKERS))
        def acquire(self, worker: str) -> None:
            if worker in self.model.values():
                return  # a worker thread holds at most one job
            job = self.queue.acquire(worker, acquire_timeout)
            instant = [j for j, s in self.model.items() if s == "instant"]
            assert (job is None) == (not instant)
            if job is not None:
                assert self.model[job] == "instant"
                self.model[job] = worker

        @rule(
            worker=st.sampled_from(WORKERS),
            job=st.sampled_from(JOBS),
            nack=st.booleans(),
            replayed=st.booleans(),
        )
        def settle(self, worker: str, job: bytes, nack: bool, replayed: bool) -> None:
            """Any worker may ask, holder or not (a scrubbed one that woke up); a replayed
            call finds the job gone from its pending list and changes nothing."""
            held = self.model.get(job) == worker
            at = self.now + 10 if nack else None
            assert self.queue.settle(worker, job, self.now, at) == held
            if held:
                if nack:
                    self.model[job], self.due[job] = "scheduled", self.now + 10
                else:
                    del self.model[job]
            if replayed:
                assert self.queue.settle(worker, job, self.now, at) is False

        @rule(worker=st.sampled_from(WORKERS), alive=st.booleans())
        def scrub(self, worker: str, alive: bool) -> None:
            """ScrubQueues judges silence by the process's heartbeat on Redis's clock."""
            process = worker.split("/")[0]
            self.client.hset(self.queue.place.workers, process, 10**15 if alive else 0)
            held = [j for j, s in self.model.items() if s == worker]
            moved = self.queue.scrub(worker, 1000)
            assert moved == (-1 if alive else len(held))
            if not alive:
                for job in held:
                    self.model[job] = "instant"

        @rule(worker=st.sampled_from(WORKERS))
        def scrub_itself(self, worker: str) -> None:
            held = [j for j, s in self.model.items() if s == worker]
            assert self.queue.scrub(worker) == len(held)
            for job in held:
                self.model[job] = "instant"

        @invariant()
        def every_job_in_exactly_one_state(self) -> None:
            for job in JOBS:
                states = self.queue.states(job)
                expected = self.model.get(job)
                if expected is None:
                    assert states == [] and not self.queue.indexed(job)
                else:
                    kind = expected if expected in ("scheduled", "instant") else "pending"
                    assert states == [kind] and self.queue.indexed(job)

    return QueueMachine


@MANY_EXAMPLES
def test_queue_state_machine_on_fakeredis():
    server = fakeredis.FakeServer()
    run_state_machine_as_test(
        machine(lambda: fakeredis.FakeRedis(server=server), 0.001),
        settings=settings(max_examples=examples(150), stateful_step_count=40, deadline=None),
    )


@MANY_EXAMPLES
def test_queue_state_machine_on_the_real_server(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    run_state_machine_as_test(
        machine(lambda: client, 0.001),
        settings=settings(max_examples=examples(10), stateful_step_count=25, deadline=None),
    )

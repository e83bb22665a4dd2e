"""The side of bench.destinations that is the same for every broker: what a measurement
asks of a broker (Target, which bench.destinations_nats and bench.destinations_rabbit
answer), a fresh subscriber whose destination is that broker, the events published to
it, the listing, and the CPU and noise accounting of a measurement.

Kept apart from the brokers so that the throughput (bench.destinations_rate) and the
broker killed (bench.destinations_kill) are measured by one code path for both: a
difference between NATS and RabbitMQ is then the broker's and busbar's publisher for
it, not the benchmark's.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from bench import common

MAX_1, MAX_100 = "busbar, max 1", "busbar, max 100"  # the throughput's busbar cases
DISTURBED = 0.25  # other jobs' cores during a measurement beyond which it is taken again
TIMEOUT_S = 20.0  # BUSBAR_TIMEOUT's default: the bound of a batch's attempt
WAIT_S = 600.0  # the longest a measurement waits for its events (SQS's moto is slow)
POST_MAX = 1000  # events per publish in bulk
ORDER = {
    "total": 1234.5, "currency": "EUR", "email": "ann@example.test",
    "customer": {"name": "Ann", "country": "DE"},
    "items": [{"sku": "a-100", "qty": 1}, {"sku": "b-200", "qty": 2}],
}  # fmt: skip


class Stored(NamedTuple):
    """A message as the broker holds it."""

    seq: int  # its place in the stream or the queue
    subject: str  # NATS subject, or RabbitMQ routing key
    msg_id: str  # Nats-Msg-Id, or message_id
    data: bytes
    at: float  # when the broker stored it (epoch seconds); 0 where the broker keeps none
    headers: dict[str, str]  # those beyond the id (trace context)


class Target(Protocol):
    """A broker as the measurements use it: `n` names a measurement's own stream (NATS)
    or exchange and queue (RabbitMQ), made by fresh(n) and removed by remove(n)."""

    name: str  # "NATS JetStream", "RabbitMQ", "Amazon SQS"
    baseline: str  # the baseline's case name, "nats-py loop (baseline)"
    # each busbar case's baseline: `baseline` for both, but where the client has one
    # call per message and another per batch (SQS: SendMessage, SendMessageBatch)
    baselines: dict[str, str]

    def pid(self) -> int: ...  # the broker's process, for its CPU
    def fresh(self, n: int) -> None: ...
    def destination(self, n: int) -> dict[str, Any]: ...
    def count(self, n: int) -> int: ...  # messages held so far
    def span(self, n: int, count: int) -> tuple[float, float]: ...  # first, count-th stored
    def read(self, n: int) -> list[Stored]: ...
    def publish_loop(self, n: int, messages: list[Stored], baseline: str) -> float: ...  # CPU s
    def remove(self, n: int) -> None: ...
    def kill(self) -> None: ...  # SIGKILL
    def restart(self) -> None: ...  # on the same port and store; returns once it listens
    def arrivals(self, n: int, held: list[Stored], since: float) -> tuple[float, float]: ...


def subscribe(
    the_bus: common.Bus, n: int, destination: dict[str, Any], **extra: Any
) -> tuple[str, str]:
    """A fresh subscriber `d<n>` on a topic of its own, its events to `destination`:
    its token and the topic."""
    token, topic = f"d{n}", common.topic_name(str(n))
    with contextlib.closing(the_bus.client(token)) as api:
        api.ok("POST", "/subscription",
               {"topics": [topic], "destination": destination, "timeout": 0, **extra})  # fmt: skip
    return token, topic


def events(count: int, keys: int = 0) -> list[dict[str, Any]]:
    return [
        {"type": "create", "url": f"https://shop.test/orders/{i}", "data": {"i": i, **ORDER},
         **({"key": f"k{i % keys}"} if keys else {})} for i in range(count)
    ]  # fmt: skip


def publish(the_bus: common.Bus, topic: str, batch: list[dict[str, Any]]) -> None:
    with contextlib.closing(the_bus.api("pub")) as api:
        for at in range(0, len(batch), POST_MAX):
            api.ok("POST", f"/topics/{topic}", batch[at : at + POST_MAX])


def listing(the_bus: common.Bus, token: str) -> dict[str, Any]:
    with contextlib.closing(the_bus.api(token)) as api:
        (entry,) = json.loads(api.ok("GET", "/subscriptions"))
    return dict(entry)


def wait_for(done: Callable[[], bool], what: str, seconds: float = WAIT_S) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {seconds:.0f} s")
        time.sleep(0.1)


class Cpu:
    """CPU seconds of the processes of a measurement, and the machine's busy time
    beyond them (another job on the 2 cores)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.began, self.busy = time.monotonic(), common.busy_seconds()
        self.start = self.now()

    def now(self) -> dict[str, float]:
        found = {name: common.cpu_seconds(pid) for name, pid in self.pids.items()}
        return found | {"bench": time.process_time()}

    def used(self) -> tuple[dict[str, float], float]:
        """Each one's CPU seconds since, and other jobs' cores meanwhile."""
        now = self.now()
        used = {name: now[name] - self.start[name] for name in now}
        elapsed = time.monotonic() - self.began
        return used, max(0.0, common.busy_seconds() - self.busy - sum(used.values())) / elapsed


def pids(the_bus: common.Bus, target: Target) -> dict[str, int]:
    return {**the_bus.pids, "broker": target.pid()}


class Retries:
    """A run's budget of measurements taken again because another job on the 2 cores
    took more than DISTURBED of a core meanwhile: it would show as busbar's slowness."""

    def __init__(self, left: int) -> None:
        self.left, self.used = left, 0

    def steady(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        while True:
            one = run()
            if one["other cores"] <= DISTURBED or self.used >= self.left:
                return one
            self.used += 1
            print(f"disturbed ({one['other cores']:.2f} cores of other jobs): again", flush=True)


def rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}

"""The production delivery steps (app/delivery/steps.py's AsyncDelivery, what every slot
of `busbar worker`'s engine runs) driven from synchronous tests: each step runs to its
end on an event loop of the driver's own, on a real Redis, with the test's clock. What
the tests of the delivery core (the state machines, fencing, the failure policy, Expire)
check is then the engine's own code, not a twin of it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import redis

from app.clock import Clock, now_ms
from app.delivery.callback import CallbackClient, Timeouts
from app.delivery.flight import Finished, Flight, Outcome, Taken
from app.delivery.plan import MAX_RUN
from app.delivery.steps import AsyncDelivery
from app.lua import AsyncScripts
from app.models.attempt_result import AttemptResult
from app.models.callback_policy import Policy
from app.models.keys import Keys
from app.models.queue import JobQueue
from app.redis_client import connect_async
from config.settings import Settings

CONNECTIONS = 4  # a slot's steps one at a time: a small pool is the engine's, scaled down


def url_of(client: redis.Redis) -> str:
    """The test's server, as the synchronous client reaches it."""
    found = client.connection_pool.connection_kwargs
    host, port, db = found.get("host", "127.0.0.1"), found.get("port", 6379), found.get("db", 0)
    return f"redis://{host}:{port}/{db}"


class Driven:
    """AsyncDelivery's steps as blocking calls: run, begin, take, send, finish."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        settings: Settings,
        max_run: int = MAX_RUN,
        clock: Clock = now_ms,
        policy: Policy | None = None,
    ) -> None:
        """`policy`: the callback address policy, if not the settings' own."""
        self.loop = asyncio.new_event_loop()
        self.settings = replace(settings, redis_url=url_of(client), redis_cluster=False)

        async def made() -> AsyncDelivery:
            self.redis = connect_async(self.settings, connections=CONNECTIONS + 2, timeout=None)
            self.scripts = AsyncScripts(self.redis, CONNECTIONS)
            # as the engine has it (client_options), the connection wait bounded by the
            # answer's deadline: a test that sends to a dead port fails, never hangs
            self.http = CallbackClient(
                policy=policy if policy is not None else Policy.of(settings),
                verify=settings.callback_verify,
                timeouts=Timeouts(settings.connect_timeout, settings.timeout),
            )
            return AsyncDelivery(keys, self.scripts, settings, self.http, max_run, clock=clock)

        self.delivery = self.loop.run_until_complete(made())

    def run(
        self,
        token: str,
        worker: str,
        job: bytes,
        first: Flight | Outcome | None = None,
        sweep: Sequence[JobQueue] = (),
    ) -> Outcome:
        return self.loop.run_until_complete(self.delivery.run(token, worker, job, first, sweep))

    def begin(self, token: str, worker: str, job: bytes) -> Flight | Outcome:
        return self.loop.run_until_complete(self.delivery.begin(token, worker, job))

    def take(self, queues: Sequence[JobQueue], worker: str) -> Taken | None:
        return self.loop.run_until_complete(self.delivery.take(queues, worker))

    def send(self, flight: Flight) -> AttemptResult:
        return self.loop.run_until_complete(self.delivery.send(flight))

    def finish(self, flight: Flight, result: AttemptResult) -> Outcome:
        return self.finish_and_next(flight, result, go_on=False)[0]

    def finish_and_next(
        self, flight: Flight, result: AttemptResult, go_on: bool, sweep: Sequence[JobQueue] = ()
    ) -> Finished:
        return self.loop.run_until_complete(self.delivery.finish(flight, result, go_on, sweep))

    def close(self) -> None:
        self.delivery.close()

        async def closed() -> None:
            # a broker's connections too: closed with the loop still open, not left to a
            # finalizer that finds it closed (an unraisable error, which pytest's hook
            # formats with ast.parse: inside hypothesis's own ast.parse of a later test,
            # CPython 3.11 fails that one with "AST constructor recursion depth mismatch")
            await self.delivery.destinations.close()
            await self.scripts.close()
            await self.http.close()
            await self.redis.aclose()

        self.loop.run_until_complete(closed())
        self.loop.close()

"""A delivery's steps on the engine's asyncio clients: take, begin, send, ack or fail.

Every delivery goes through these steps and the one state machine in Lua (the tests
drive them too: spec/app/delivery/driven.py). Between the begin and the ack the only
state is in Redis: the job in the slot's own pending list, the batch marked in flight
under a nonce. A crash anywhere delivers the batch again later, never zero times; an
answer is recorded only by the slot that still holds the job, for the delivery in flight.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from app.clock import Clock, now_ms
from app.delivery import calls
from app.delivery.answer import KEPT
from app.delivery.callback import CallbackClient, tls_context
from app.delivery.credentials import FlightCredentials
from app.delivery.destinations import Destinations
from app.delivery.dialer import Dialer
from app.delivery.flight import Finished, Flight, Outcome, Taken, begun
from app.delivery.plan import MAX_RUN, Plan
from app.delivery.replies import lost_answer, taken
from app.delivery.request import Request, Sender
from app.delivery.shaper import Shaper
from app.delivery.share import Share
from app.delivery.tags import Kind
from app.delivery.token_fetch import AuthFailed
from app.delivery.token_source import TokenPending
from app.errors import JobLost, OriginBusy, SlowLaneSpent
from app.lua import AsyncScripts
from app.models.attempt_result import (
    AUTH_FAILED,
    NOTHING_SENT,
    UNSEALABLE,
    AttemptResult,
    failed,
    held_back,
)
from app.models.keys import Keys
from app.models.queue import Located, script_groups
from app.models.sealed import Unsealable
from app.models.transform import transform_bounds
from app.services.sealed_headers import sealer_of
from app.tracing import NO_TRACING, Tracing
from config.settings import Settings

log = logging.getLogger(__name__)


class AsyncDelivery(Plan):
    """One per engine, shared by its slots (Room.delivery): the loop runs one step at a
    time, so one page of draws of nonces and salts serves them all."""

    def __init__(
        self,
        keys: Keys,
        scripts: AsyncScripts,
        settings: Settings,
        http: CallbackClient,
        max_run: int = MAX_RUN,
        share: Share | None = None,
        clock: Clock = now_ms,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        super().__init__(keys, settings, max_run, clock)
        self._scripts = scripts
        self._sender = Sender(http, settings, clock, tracing)
        self._credentials = FlightCredentials(keys, scripts, http, settings, clock)
        tls = functools.partial(tls_context, http.verify)
        self.destinations = Destinations(
            Dialer(http.policy, tls(), settings.connect_timeout), tls,
            functools.partial(sealer_of, settings), settings,
        )  # fmt: skip
        self._share = share
        # transforms run in processes of their own (app/delivery/shaping.py): an
        # evaluation may take up to BUSBAR_TRANSFORM_TIME_MS, a batch's up to
        # BUSBAR_TRANSFORM_BATCH_MS, and the loop goes on with every other delivery
        self._shaper = Shaper(
            transform_bounds(settings), settings.transform_batch_ms / 1000,
            slow_ms=settings.transform_slow_ms,
        )  # fmt: skip

    def close(self) -> None:
        """The transforms' processes stop (none were started for a bus without any)."""
        self._shaper.close()

    async def take(self, queues: Sequence[Located], worker: str) -> Taken | None:
        """A sweep of `queues` in that order: the first job, its delivery begun in the
        same step (None third for a job that is not a delivery); None when all empty."""
        nonce, salt = self._draws.nonce_and_salt()
        for group in script_groups(list(queues)):
            call = calls.take(calls.Sweep.of(group, worker), worker, self._clock(), nonce, salt)
            issued = time.monotonic()
            found, ok = await self._scripts.confirmed(call)
            if found is not None:
                return taken(group, worker, nonce, found, issued, ok)
        return None

    async def begin(self, pid: str, worker: str, job: bytes) -> Flight | Outcome:
        nonce, salt = self._draws.nonce_and_salt()
        call = calls.begin(self._keys, pid, worker, job, self._clock(), nonce, salt)
        issued = time.monotonic()
        reply, confirmed = await self._scripts.confirmed(call)
        return begun(pid, worker, job, nonce, reply, issued, confirmed)

    async def run(
        self,
        pid: str,
        worker: str,
        job: bytes,
        first: Flight | Outcome | None = None,
        sweep: Sequence[Located] = (),
    ) -> Outcome:
        """One run of the subscriber's job: begin (unless the take began it already),
        send, then ack or fail. While the subscriber has more due at once, the ack begins
        the next batch in the same step, up to max_run in a row; then the job goes back
        in line behind the others. The ack that ends the run also takes the slot's next
        job from `sweep` and begins it (Outcome.taken): one round trip a delivery, not
        two, while jobs are waiting."""
        flight: Flight | Outcome | None = (
            first if first is not None else await self.begin(pid, worker, job)
        )
        outcome = Outcome(Kind.IDLE)
        runs = 0
        while isinstance(flight, Flight):
            runs += 1
            result = await self.send(flight)
            outcome, flight = await self.finish(flight, result, runs < self._max_run, sweep)
        return flight if isinstance(flight, Outcome) else outcome

    async def send(self, flight: Flight) -> AttemptResult:
        """A failing subscriber's attempt goes out only with a place in the share (else
        it is held back); a healthy one is watched for slowness. A flight whose begin
        the replicas BUSBAR_REDIS_MIN_REPLICAS asks for were not seen to hold is held
        back, unsent: a failover could otherwise deliver its events twice, in batches
        that differ (the master's, then the promoted replica's)."""
        if flight.unconfirmed:
            log.info("%s held back: its begin is not on a replica yet", flight.client)
            return held_back(self._settings.redis_replica_timeout_ms)
        if flight.transforms and not flight.shaped:
            try:
                flight.shaped.append(await self._shaper.shape(flight))
            except SlowLaneSpent as exc:  # unshaped, unsent: again once the share allows
                return held_back(exc.delay_ms)
            if flight.shaped[0].nothing_to_send:
                return NOTHING_SENT
        place = self._share if flight.failing else None  # needed before it is sent
        if flight.destination:  # a broker (docs/destinations.md): no request to make
            return await self._placed(place, lambda: self.destinations.send(flight))
        watched = None if flight.failing else self._share  # taken only if it is slow
        try:
            request = await self._credentials.request(flight, watched)
        except Unsealable as exc:  # sent without its secret, it would be refused anyway
            log.warning("delivery to %s not sent: a secret of its subscription does not "
                        "open: %s", flight.client, exc.message)  # fmt: skip
            flight.answer[:] = exc.message.encode()[:KEPT]  # the attempt log's body says why
            return failed(UNSEALABLE)
        except AuthFailed as exc:
            return self._auth_failed(flight, exc)
        except (TokenPending, OriginBusy) as exc:
            return held_back(exc.delay_ms)
        return await self._placed(place, lambda: self._sent(request))

    @staticmethod
    async def _placed(
        place: Share | None, send: Callable[[], Awaitable[AttemptResult]]
    ) -> AttemptResult:
        """`send` at once, or, for a failing subscriber (`place`), only with a place in
        the share, given back after; else held back."""
        if place is None:
            return await send()
        if not place.take():
            return place.held_back()
        try:
            return await send()
        finally:
            place.give()

    async def _sent(self, request: Request) -> AttemptResult:
        """The request sent; an OAuth2 token the callback refuses (401) is renewed once,
        by one worker for the whole bus, and the batch sent again with the new one."""
        result = await self._sender.send(request)
        if result.code != 401:
            return result
        try:
            again = await self._credentials.renewed(request)
        except AuthFailed as exc:
            return self._auth_failed(request.flight, exc)
        except (TokenPending, OriginBusy) as exc:  # another worker renews it, or the
            return held_back(exc.delay_ms)  # token origin is busy: again soon
        except Unsealable:
            return result
        if again is None:
            return result
        log.info("%s refused its OAuth2 token (401): sent again with a new one",
                 request.flight.client)  # fmt: skip
        return await self._sender.send(again)

    def _auth_failed(self, flight: Flight, exc: AuthFailed) -> AttemptResult:
        """The attempt failed before a request: why, in the attempt log's body."""
        log.warning("delivery to %s not sent: %s", flight.client, exc.message)
        flight.answer[:] = exc.message.encode()[:KEPT]
        return failed(AUTH_FAILED)

    async def finish(
        self, flight: Flight, result: AttemptResult, go_on: bool, sweep: Sequence[Located] = ()
    ) -> Finished:
        """Ack (2xx) or fail the batch and settle the job in one script. With `go_on`, an
        acknowledgement also begins the subscriber's next batch when one is due at once:
        (outcome, that flight or what the job did). With `sweep`, an acknowledgement that
        ends the job's run sweeps those of the queues one script may name with the
        subscriber's own (all on one Redis, its shard on a cluster) for the slot's next
        job: Outcome.taken."""
        f = self.finishing(flight, result, go_on, sweep)
        issued = time.monotonic()
        try:
            reply, confirmed = await self._scripts.confirmed(f.call)
        except JobLost:
            raise lost_answer(flight, result.text) from None
        return self.read_settled(f, flight, reply, issued, confirmed)

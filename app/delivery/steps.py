"""A delivery's steps on the engine's asyncio clients: take, begin, send, ack or fail.

Every delivery goes through these steps and the one state machine in Lua (the tests
drive them too: spec/app/delivery/driven.py). Between the begin and the ack the only
state is in Redis: the job in the slot's own pending list, the batch marked in flight
under a nonce. A crash anywhere delivers the batch again later, never zero times; an
answer is recorded only by the slot that still holds the job, for the delivery in flight.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from app.clock import Clock, now_ms
from app.codec import QueuedEvent
from app.delivery import backpressure, calls
from app.delivery.answer import KEPT
from app.delivery.callback import CallbackClient, tls_context
from app.delivery.credentials import Credentials
from app.delivery.flight import Flight, Outcome, Taken, begun
from app.delivery.identities import Identity
from app.delivery.plan import (
    AUTH_FAILED_STATUS,
    MAX_RUN,
    REFUSED_STATUS,
    UNSEALABLE_STATUS,
    Plan,
    traced_body,
)
from app.delivery.replies import lost_answer, taken
from app.delivery.shaper import Shaper
from app.delivery.share import CUT_SLOW, Share
from app.delivery.tags import Kind
from app.delivery.token_fetch import AuthFailed
from app.delivery.token_source import TokenPending, TokenSource
from app.errors import CallbackRefused, JobLost, OriginBusy
from app.lua import AsyncScripts
from app.models.attempt_result import NOTHING_SENT, AttemptResult, answered, failed, held_back
from app.models.callback_auth import stored_auth
from app.models.keys import Keys, owner
from app.models.queue import JobQueue, script_groups
from app.models.sealed import Unsealable
from app.models.transform import transform_bounds
from app.services import signing
from app.services.failure import TIMEOUT, reason
from app.services.push_tokens import PushSigner
from app.services.sealed_headers import sealer_of
from app.tracing import NO_TRACING, Tracing
from config.settings import Settings

log = logging.getLogger(__name__)
ABANDONED = failed("abandoned")  # an attempt cancelled before its answer
REMEMBERED = 4096  # stored auth fields a worker keeps parsed
PARK_MARGIN_S = 0.5  # a parked flight gives up this long before its lease ends
REPLAY_HEADER = "Busbar-Replay"  # names the lake replay (spark/replay.py) that queued a batch


async def send(
    http: CallbackClient,
    settings: Settings,
    flight: Flight,
    share: Share | None = None,
    clock: Clock = now_ms,
    tracing: Tracing = NO_TRACING,
    own: Mapping[str, str] = MappingProxyType({}),
    bearer: str | None = None,
    identity: Identity | None = None,
) -> AttemptResult:
    """POST the batch, with the subscriber's `own` headers before busbar's: the status
    code (with the wait a 429 or 503 asked for: app/delivery/backpressure.py), or the
    reason there was none. Not
    sent (JobLost) when the flight began over half the scrub window ago: the process
    was paused, and another worker may own the batch by now. With `share`, a healthy
    subscriber's attempt still in flight at BUSBAR_SLOW_AFTER_S counts toward it, or is
    cut there when it is full (app/delivery/share.py). The first event's trace context
    is propagated in `traceparent`, or with `tracing` on, the attempt's span's, a child
    of it (docs/tracing.md). `bearer`: a push token sent in place of the Basic uuid;
    `identity`: the subscription's own TLS client certificate."""
    events: list[QueuedEvent] | None = [] if tracing.on else None
    body, first = traced_body(flight, events)
    headers = {**own, **signing.headers(
        settings.signing_key, flight.salts, owner(flight.token), flight.batch_id.decode(),
        flight.created_at, clock() // 1000, body,
    )}  # fmt: skip
    if flight.replay:
        headers[REPLAY_HEADER] = flight.replay
    check_lease(flight, settings)
    if events is None:  # tracing off: the first event's context goes on as it came
        if first is not None:
            headers["traceparent"] = first.traceparent
            if first.tracestate is not None:
                headers["tracestate"] = first.tracestate
        return await post(http, settings, flight, body, headers, share, bearer, identity)
    span = tracing.delivery(flight, events)
    if span.context is not None:  # the subscriber's span becomes a child of this attempt's
        headers.update(span.context.headers())
    result = ABANDONED  # what a cancelled attempt's span says
    try:
        result = await post(http, settings, flight, body, headers, share, bearer, identity)
    finally:
        span.end(result.code or 0, "" if result.ok else result.text)
    return result


def lease_end(flight: Flight, settings: Settings) -> float:
    """Until when (time.monotonic()) a parked flight may wait for its connection: its
    lease, less PARK_MARGIN_S, so it is held back rather than found lost."""
    return _leased_until(flight, settings) - PARK_MARGIN_S


def _leased_until(flight: Flight, settings: Settings) -> float:
    """Half the scrub window from the flight's begin: past it, another worker may own
    the batch."""
    return flight.leased_from + settings.scrub_after_ms / 2000


def check_lease(flight: Flight, settings: Settings) -> None:
    """JobLost when the flight began over half the scrub window ago: checked before the
    wait for a connection and again after it, just before the request is written."""
    if time.monotonic() > _leased_until(flight, settings):
        raise JobLost(f"delivery to {flight.client} not sent: the delivery began too long ago")


async def post(
    http: CallbackClient,
    settings: Settings,
    flight: Flight,
    body: bytes,
    headers: dict[str, str],
    share: Share | None,
    bearer: str | None = None,
    identity: Identity | None = None,
) -> AttemptResult:
    """send()'s request and what its answer means. The connection is waited for first,
    outside BUSBAR_TIMEOUT (app/delivery/gate.py); an origin too busy to give one in time
    holds the attempt back, unsent, like a Retry-After."""
    watch = None
    try:
        connection = await http.connection(flight.callback, identity, lease_end(flight, settings))
        try:
            check_lease(flight, settings)  # the wait may have been long
        except JobLost:
            connection.close()
            raise
        async with asyncio.timeout(settings.timeout) as deadline:
            watch = share.watch(deadline) if share is not None else None
            answer = await http.exchange(
                flight.callback, body, {"Content-Type": "application/json", **headers},
                flight.uuid, connection, bearer, identity, timed=False,
            )  # fmt: skip
        flight.answer[:] = answer.body
        wait = backpressure.wait_ms(answer.status, answer.retry_after, settings.max_retry_after_s)
        return answered(answer.status, wait)
    except TimeoutError:
        return failed(CUT_SLOW if watch is not None and watch.cut else TIMEOUT)
    except OriginBusy as exc:
        log.debug("%s held back: %s", flight.client, exc.message)
        return held_back(exc.delay_ms)
    except JobLost:
        raise
    except CallbackRefused as exc:
        log.warning("callback of %s refused: %s", flight.client, exc.message)
        return failed(REFUSED_STATUS)
    except Exception as exc:  # every way a request fails is a failed attempt
        return failed(reason(exc))
    finally:
        if watch is not None:
            watch.done()


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
        self._http = http
        tls = functools.partial(tls_context, http.verify)
        self._credentials = Credentials(lambda: sealer_of(settings), tls)
        self._signer = PushSigner(keys, scripts, lambda: sealer_of(settings), settings.public_url)
        self._tokens = TokenSource(keys, scripts, http, lambda: sealer_of(settings),
                                   settings.timeout, clock)  # fmt: skip
        self._auths: dict[bytes, dict[str, Any]] = {}  # parsed once per stored content
        self._share = share
        self._tracing = tracing
        # transforms run in processes of their own (app/delivery/shaping.py): an
        # evaluation may take up to BUSBAR_TRANSFORM_TIME_MS, a batch's up to
        # BUSBAR_TRANSFORM_BATCH_MS, and the loop goes on with every other delivery
        self._shaper = Shaper(transform_bounds(settings), settings.transform_batch_ms / 1000)

    def close(self) -> None:
        """The transforms' processes stop (none were started for a bus without any)."""
        self._shaper.close()

    async def take(self, queues: Sequence[JobQueue], worker: str) -> Taken | None:
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

    async def begin(self, token: str, worker: str, job: bytes) -> Flight | Outcome:
        nonce, salt = self._draws.nonce_and_salt()
        call = calls.begin(self._keys, token, worker, job, self._clock(), nonce, salt)
        issued = time.monotonic()
        reply, confirmed = await self._scripts.confirmed(call)
        return begun(token, worker, job, nonce, reply, issued, confirmed)

    async def run(
        self,
        token: str,
        worker: str,
        job: bytes,
        first: Flight | Outcome | None = None,
        sweep: Sequence[JobQueue] = (),
    ) -> Outcome:
        """One run of the subscriber's job: begin (unless the take began it already),
        send, then ack or fail. While the subscriber has more due at once, the ack begins
        the next batch in the same step, up to max_run in a row; then the job goes back
        in line behind the others. The ack that ends the run also takes the slot's next
        job from `sweep` and begins it (Outcome.taken): one round trip a delivery, not
        two, while jobs are waiting."""
        flight: Flight | Outcome | None = (
            first if first is not None else await self.begin(token, worker, job)
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
        share = self._share
        if flight.unconfirmed:
            log.info("%s held back: its begin is not on a replica yet", flight.client)
            return held_back(self._settings.redis_replica_timeout_ms)
        if flight.transforms and not flight.shaped:
            flight.shaped.append(await self._shaper.shape(flight))
            if flight.shaped[0].nothing_to_send:
                return NOTHING_SENT
        try:
            own, identity = self._credentials.of(flight.token, flight.headers, flight.client_cert)
            bearer = await self.bearer(flight, identity)
        except Unsealable as exc:  # sent without its secret, it would be refused anyway
            log.warning("delivery to %s not sent: a secret of its subscription does not "
                        "open: %s", flight.client, exc.message)  # fmt: skip
            flight.answer[:] = exc.message.encode()[:KEPT]  # the attempt log's body says why
            return failed(UNSEALABLE_STATUS)
        except AuthFailed as exc:
            return self._auth_failed(flight, exc)
        except (TokenPending, OriginBusy) as exc:
            return held_back(exc.delay_ms)
        if share is None or not flight.failing:
            return await self._sent(flight, share, own, bearer, identity)
        if not share.take():
            return share.held_back()
        try:
            return await self._sent(flight, None, own, bearer, identity)
        finally:
            share.give()

    async def _sent(
        self,
        flight: Flight,
        share: Share | None,
        own: Mapping[str, str],
        bearer: str | None,
        identity: Identity | None,
    ) -> AttemptResult:
        """send(); an OAuth2 token the callback refuses (401) is renewed once, by one
        worker for the whole bus, and the batch sent again with the new one."""
        settings, clock, http, tracing = self._settings, self._clock, self._http, self._tracing
        result = await send(http, settings, flight, share, clock, tracing, own, bearer, identity)
        if result.code != 401 or bearer is None or self._auth(flight.auth).get("type") != "oauth2":
            return result
        try:
            bearer = await self._tokens.renewed(flight.token, flight.auth, identity, bearer)
        except AuthFailed as exc:
            return self._auth_failed(flight, exc)
        except (TokenPending, OriginBusy) as exc:  # another worker renews it, or the
            return held_back(exc.delay_ms)  # token origin is busy: again soon
        except Unsealable:
            return result
        log.info("%s refused its OAuth2 token (401): sent again with a new one", flight.client)
        return await send(http, settings, flight, share, clock, tracing, own, bearer, identity)

    def _auth_failed(self, flight: Flight, exc: AuthFailed) -> AttemptResult:
        """The attempt failed before a request: why, in the attempt log's body."""
        log.warning("delivery to %s not sent: %s", flight.client, exc.message)
        flight.answer[:] = exc.message.encode()[:KEPT]
        return failed(AUTH_FAILED_STATUS)

    def _auth(self, raw: bytes) -> dict[str, Any]:
        """The stored auth, parsed once per content ({} for basic)."""
        found = self._auths.get(raw)
        if found is None:
            if len(self._auths) >= REMEMBERED:
                self._auths.clear()
            found = self._auths[raw] = stored_auth(raw) or {}
        return found

    async def bearer(self, flight: Flight, identity: Identity | None = None) -> str | None:
        """The token sent in place of the Basic uuid: a push token (`auth` jwt), an
        OAuth2 access token (`auth` oauth2, fetched over `identity` on https), else None."""
        auth = self._auth(flight.auth)
        kind = auth.get("type")
        if kind == "oauth2":
            return await self._tokens.bearer(flight.token, flight.auth, identity)
        if kind != "jwt":
            return None
        audience = auth.get("audience") or flight.callback
        return await self._signer.bearer(flight.client, audience, self._clock())

    async def finish(
        self, flight: Flight, result: AttemptResult, go_on: bool, sweep: Sequence[JobQueue] = ()
    ) -> tuple[Outcome, Flight | Outcome | None]:
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
        return self.finished(f, flight, reply, issued, confirmed)

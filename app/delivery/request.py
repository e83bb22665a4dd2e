"""One attempt's request: the batch POSTed to the callback with everything it carries, and
what the answer means (an AttemptResult, app/models/attempt_result.py).

A Sender is the engine's way to a callback (its client, settings, clock and tracing);
a Request is one attempt: the flight and the credentials resolved for it
(app/delivery/credentials.py). The steps (app/delivery/steps.py) decide whether to
send; this sends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.clock import Clock, now_ms
from app.codec import QueuedEvent
from app.delivery import backpressure
from app.delivery.callback import CallbackClient
from app.delivery.flight import Flight
from app.delivery.identities import Identity
from app.delivery.plan import traced_body
from app.delivery.share import CUT_SLOW, Share
from app.errors import CallbackRefused, JobLost, OriginBusy
from app.models.attempt_result import (
    REFUSED_ADDRESS,
    AttemptResult,
    answered,
    failed,
    held_back,
)
from app.models.keys import owner
from app.services import signing
from app.services.failure import TIMEOUT, reason
from app.tracing import NO_TRACING, Tracing
from config.settings import Settings

log = logging.getLogger(__name__)
ABANDONED = failed("abandoned")  # an attempt cancelled before its answer
PARK_MARGIN_S = 0.5  # a parked flight gives up this long before its lease ends
REPLAY_HEADER = "Busbar-Replay"  # names the lake replay (spark/replay.py) that queued a batch


@dataclass(frozen=True)
class Request:
    """One attempt of `flight`: the subscriber's `own` headers (secrets opened), sent
    before busbar's; `bearer`, a push or OAuth2 token sent in place of the Basic uuid;
    `identity`, the subscription's own TLS client certificate; `share`, the failing
    share a healthy attempt is watched by (None: not watched)."""

    flight: Flight
    own: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    bearer: str | None = None
    identity: Identity | None = None
    share: Share | None = None


@dataclass(frozen=True)
class Sender:
    http: CallbackClient
    settings: Settings
    clock: Clock = now_ms
    tracing: Tracing = NO_TRACING

    async def send(self, request: Request) -> AttemptResult:
        """POST the batch: its status code (with the wait a 429 or 503 asked for:
        app/delivery/backpressure.py), or the reason there was none. Not sent (JobLost)
        when the flight began over half the scrub window ago: the process was paused,
        and another worker may own the batch by now. With a share, a healthy
        subscriber's attempt still in flight at BUSBAR_SLOW_AFTER_S counts toward it, or
        is cut there when it is full (app/delivery/share.py). The first event's trace
        context is propagated in `traceparent`, or with tracing on, the attempt's
        span's, a child of it (docs/tracing.md)."""
        flight, settings = request.flight, self.settings
        events: list[QueuedEvent] | None = [] if self.tracing.on else None
        body, first = traced_body(flight, events)
        headers = {**request.own, **signing.headers(
            settings.signing_key, flight.salts, owner(flight.pid), flight.batch_id.decode(),
            flight.created_at, self.clock() // 1000, body,
        )}  # fmt: skip
        if flight.replay:
            headers[REPLAY_HEADER] = flight.replay
        check_lease(flight, settings)
        if events is None:  # tracing off: the first event's context goes on as it came
            if first is not None:
                headers["traceparent"] = first.traceparent
                if first.tracestate is not None:
                    headers["tracestate"] = first.tracestate
            return await self.post(request, body, headers)
        span = self.tracing.delivery(flight, events)
        if span.context is not None:  # the subscriber's span becomes a child of this attempt's
            headers.update(span.context.headers())
        result = ABANDONED  # what a cancelled attempt's span says
        try:
            result = await self.post(request, body, headers)
        finally:
            span.end(result.code or 0, "" if result.ok else result.text)
        return result

    async def post(self, request: Request, body: bytes, headers: dict[str, str]) -> AttemptResult:
        """send()'s request and what its answer means. The connection is waited for
        first, outside BUSBAR_TIMEOUT (app/delivery/gate.py); an origin too busy to give
        one in time holds the attempt back, unsent, like a Retry-After."""
        flight, identity = request.flight, request.identity
        settings, http = self.settings, self.http
        watch = None
        try:
            until = lease_end(flight, settings)
            connection = await http.connection(flight.callback, identity, until)
            try:
                check_lease(flight, settings)  # the wait may have been long
            except JobLost:
                connection.close()
                raise
            async with asyncio.timeout(settings.timeout) as deadline:
                watch = request.share.watch(deadline) if request.share is not None else None
                answer = await http.exchange(
                    flight.callback, body, {"Content-Type": "application/json", **headers},
                    flight.uuid, connection, request.bearer, identity, timed=False,
                )  # fmt: skip
            flight.answer[:] = answer.body
            most = settings.max_retry_after_s
            wait = backpressure.wait_ms(answer.status, answer.retry_after, most)
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
            return failed(REFUSED_ADDRESS)
        except Exception as exc:  # every way a request fails is a failed attempt
            return failed(reason(exc))
        finally:
            if watch is not None:
                watch.done()


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

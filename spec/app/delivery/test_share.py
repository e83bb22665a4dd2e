"""The failing share (app/delivery/share.py) on the engine's own send path, against a real
endpoint that accepts and never answers: a slow attempt takes a place or is cut, a
failing subscriber's attempt goes out only with a place, and every place is given back."""

from __future__ import annotations

import asyncio
import time

from app.delivery.callback import CallbackClient, client_options
from app.delivery.flight import Flight
from app.delivery.request import Request, Sender
from app.delivery.share import CUT_SLOW, Share
from app.delivery.steps import AsyncDelivery
from app.models.attempt_result import AttemptResult
from app.models.callback_policy import LOOPBACK_OPEN
from config.settings import Settings
from spec.integration.crowd import crowd

SETTINGS = Settings(
    allow_http=True, timeout=5, callback_allow=LOOPBACK_OPEN.allow, root_key="share-test-root"
)


def flight(url: str, failing: bool = False) -> Flight:
    return Flight(
        "tok", "w/1", b"JOB", b"1", "NONCE", time.monotonic(), url, "", "client", [],
        failing=failing,
    )  # fmt: skip


async def sends(url: str, share: Share, n: int) -> list[tuple[str, float]]:
    """n attempts at `url` at once: (result's text, seconds taken) each."""
    http = CallbackClient(**client_options(SETTINGS))

    async def one() -> tuple[str, float]:
        began = time.monotonic()
        result = await Sender(http, SETTINGS).send(Request(flight(url), share=share))
        return result.text, time.monotonic() - began

    try:
        return list(await asyncio.gather(*(one() for _ in range(n))))
    finally:
        await http.close()


def test_slow_attempts_beyond_the_share_are_cut_and_places_are_given_back():
    share = Share(slots=10, percent=20, slow_after_s=0.5)  # 2 places
    with crowd() as holes:
        results = asyncio.run(sends(holes.url("/hole/a"), share, 5))
    statuses = sorted(s for s, _ in results)
    # 2 held a place to the end (BUSBAR_TIMEOUT: 5 s), 3 were cut at 0.5 s
    assert statuses == [CUT_SLOW] * 3 + ["timeout"] * 2
    cut = [t for s, t in results if s == CUT_SLOW]
    assert all(0.45 <= t < 1.5 for t in cut), results
    assert share.held == 0


def test_a_failing_subscribers_attempt_needs_a_place_or_is_held_back():
    share = Share(slots=10, percent=10, slow_after_s=2)  # 1 place
    refused = flight("http://127.0.0.1:9/", failing=True)

    async def scenario() -> tuple[AttemptResult, AttemptResult]:
        http = CallbackClient(**client_options(SETTINGS))
        delivery = AsyncDelivery(None, None, SETTINGS, http, share=share)  # type: ignore[arg-type]
        try:
            assert share.take()
            held_back = await delivery.send(refused)
            share.give()
            return held_back, await delivery.send(refused)
        finally:
            await http.close()

    held_back, sent = asyncio.run(scenario())
    wait = held_back.wait_ms
    assert held_back.held_back and wait is not None and 1000 <= wait <= 3000
    assert held_back.text == f"held_back retry-after {wait}" and held_back.outcome == ""
    # sent: a place was free, and given back after
    assert (sent.text, sent.outcome, sent.held_back) == ("connection_refused", "connection", False)
    assert share.held == 0

"""Subscriptions whose callback the policy now refuses, named when a worker starts.

A subscription stored before the policy refused its address (an upgrade to a busbar
that refuses loopback and private ranges by default, or an operator narrowing
BUSBAR_CALLBACK_ALLOW) is kept, not deleted: its events go on queuing and its
deliveries fail as `refused_address` under the usual backoff and circuit, until the
operator opens the address or the client subscribes again elsewhere. So that the
operator hears of it before a client does, the worker names each such subscriber at
start, by client name (never by token, which is a credential). Only what the callback
says by itself is judged here (an address, a localhost name): a host name is judged
at each delivery against what it resolves to then.
"""

from __future__ import annotations

import logging
from typing import NamedTuple
from urllib.parse import urlsplit

import redis

from app.models.callback_policy import Policy, Refusal
from app.models.keys import Keys

log = logging.getLogger(__name__)
NAMED_AT_MOST = 50  # log lines, then one line with the count of the rest
BATCH = 500  # subscribers read per pipeline


class Refused(NamedTuple):
    client: str
    host: str
    refusal: Refusal


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def refused_subscriptions(client: redis.Redis, keys: Keys, policy: Policy) -> list[Refused]:
    """Every stored subscription whose callback host the policy refuses as written."""
    names = {_text(t): _text(n) for t, n in client.hgetall(keys.tokens).items()}
    tokens = sorted(_text(t) for t in client.hkeys(keys.subscribers))
    found = []
    for start in range(0, len(tokens), BATCH):
        chunk = tokens[start : start + BATCH]
        pipe = client.pipeline(transaction=False)
        for token in chunk:
            pipe.hget(keys.subscriber(token), "callback")
        for token, callback in zip(chunk, pipe.execute(), strict=True):
            host = urlsplit(_text(callback)).hostname or "" if callback else ""
            refusal = policy.written(host) if host else None
            if refusal is not None:
                found.append(Refused(names.get(token, "(deleted client)"), host, refusal))
    return found


def name_refused(client: redis.Redis, keys: Keys, policy: Policy) -> int:
    """Log each refused subscription (warning); how many there are."""
    refused = refused_subscriptions(client, keys, policy)
    for one in refused[:NAMED_AT_MOST]:
        denied = one.refusal.denied
        opens = "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS" if denied else "BUSBAR_CALLBACK_ALLOW"
        log.warning(
            "subscriber %s: callback host %s is refused (%s); its deliveries fail as "
            "refused_address until %s opens it or the client subscribes elsewhere",
            one.client, one.host, one.refusal, opens,
        )  # fmt: skip
    if len(refused) > NAMED_AT_MOST:
        more = len(refused) - NAMED_AT_MOST
        log.warning("... and %d more subscribers with refused callbacks", more)
    return len(refused)

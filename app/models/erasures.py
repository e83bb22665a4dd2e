"""Erasures: the request (what it names, who may), its record and its receipt.

An erasure names one entity, by the url its events are about or by the ordering key its
publisher gave them, optionally on some topics only and published before a time
(default: when it was asked for), and removes its events from every store the bus keeps
(docs/erasure.md). Root may erase on any topic; a client only on the topics it
publishes (all of them when it names none). The work is done by the aux job `erase`
(app/services/erasure.py); what each shard removed is on that shard's receipt, written
by the scripts in the steps that remove, and added up here.
"""

from __future__ import annotations

import enum
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

import redis

from app import codec
from app.clock import now_ms
from app.errors import Forbidden, InvalidInput, NotFound, RateLimited
from app.lua import Scripts
from app.lua.call import Call, as_int
from app.models import lakes
from app.models.erasure_calls import Match
from app.models.fields import Checked, Integer, Rules, Shape, Utf8
from app.models.keys import Keys
from app.models.validate import MAX_URL, topic_name
from app.redis_client import text

LISTED = 100  # GET /erasures: the newest
# Each erasure running costs passes over every queue: a client may have this many at once
# (429 past it), and the bus this many in all (root's included).
RUNNING_PER_CLIENT = 10
RUNNING_MAX = 100
RETRY_MS = 10_000
STORES = {  # receipt section -> its counts, as the scripts name them (`<section>.<count>`)
    "queued": ("events", "batches_removed", "batches_rewritten"),
    "coalescing": ("entries",),
    "deadletters": ("events",),
    "attempt_log": ("entries",),
    "deliveries": ("events", "entries_removed", "entries_rewritten"),
    "attempts": ("entries",),
}


def _url(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_URL or not value.strip():
        raise InvalidInput(f"url must be a string of 1 to {MAX_URL} characters")
    return value


def _topics(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidInput("topics must be a non-empty list of topic names")
    return tuple(dict.fromkeys(topic_name(t, "topics[]") for t in value))


REQUEST = Shape(
    {
        "url": Checked(_url, {"type": "string", "minLength": 1, "maxLength": MAX_URL},
                       description="the url whose events go (as published)"),
        "key": Utf8(1, 256, description="the ordering key whose events go (as published)"),
        "topics": Checked(_topics, {"type": "array", "minItems": 1, "items": {"type": "string"}},
                          description="only on these topics; absent: every topic the "
                          "caller may erase on"),
        "before": Integer(0, 2**53, description="only events whose `t` is before this "
                          "(ms); absent: when the erasure is asked for"),
    },
)  # fmt: skip


def parse(body: Any, now: int) -> Match:
    """What a request body asks for, or a 400 naming the problem; its topics are not
    looked up yet (Erasures.ask does, as it knows the caller)."""
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    REQUEST.known(body, "an erasure")
    rules = Rules()
    url = REQUEST.given(body, "url", "url", rules)
    key = REQUEST.given(body, "key", "key", rules)
    if (url is None) == (key is None):
        raise InvalidInput("an erasure names a url or a key: one of them")
    before = REQUEST.given(body, "before", "before", rules)
    if before is not None and before > now:
        raise InvalidInput(f"before ({before}) is in the future (it is {now} now)")
    topics = REQUEST.given(body, "topics", "topics", rules) or ()
    by, value = ("url", url) if url is not None else ("key", key)
    # absent: every event up to the request, those of its very millisecond included
    return Match(by, value, topics, now + 1 if before is None else before)


class Created(enum.IntEnum):
    """erasure_create's reply."""

    CREATED = 1
    BUS_FULL = -1  # the bus runs its most erasures at once (RUNNING_MAX)
    CLIENT_FULL = -2  # the client has its most running (RUNNING_PER_CLIENT)


def create(
    keys: Keys, erasure_id: str, match: Match, by: str, token: str, now: int
) -> Call[Created]:
    """The record and its job in one step: no erasure is asked for without its job."""
    c = keys.catalog
    fields = {"id": erasure_id, "by": by, "by_token": token, "state": "running",
              "created_at": now, "updated_at": now, "passes": 1,
              "match": json.dumps(match_json(match))}  # fmt: skip
    flat = [part for pair in fields.items() for part in pair]
    return Call("erasure_create",
                [c.erasures, c.erasure(erasure_id), *c.job_states("aux"), c.erasures_running],
                [erasure_id, now, job_of(erasure_id), token, RUNNING_MAX, RUNNING_PER_CLIENT,
                 *flat], lambda reply: Created(int(reply)))  # fmt: skip


def finish(keys: Keys, erasure_id: str, match: str | bytes, now: int) -> Call[int]:
    """Done: the value forgotten, and no longer counted as running."""
    c = keys.catalog
    return Call("erasure_done", [c.erasure(erasure_id), c.erasures_running],
                [erasure_id, now, forgotten(match)], as_int)  # fmt: skip


def job_of(erasure_id: str) -> bytes:
    """The aux job that carries an erasure out (jobs/erasure.py)."""
    return codec.pack_job("erase", [erasure_id])


def match_json(match: Match) -> dict[str, Any]:
    return {match.by: match.value, "topics": list(match.topics) or None, "before": match.before}


def fingerprint(value: str) -> str:
    """What a finished erasure keeps of the url or key it erased: the record would
    otherwise be the one place left that names the entity. Whoever asked can compare."""
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def forgotten(raw: str | bytes) -> str:
    """A record's `match` once its erasure is done: the value replaced by its fingerprint."""
    value = json.loads(raw)
    by = "url" if "url" in value else "key"
    value[f"{by}_fingerprint"] = fingerprint(value.pop(by))
    return json.dumps(value)


def described(raw: str) -> dict[str, Any]:
    """The receipt's view of a `match`: the url or key while running (with its
    fingerprint), the fingerprint alone once done."""
    value: dict[str, Any] = json.loads(raw)
    for by in ("url", "key"):
        if by in value:
            value[f"{by}_fingerprint"] = fingerprint(value[by])
    return value


def match_of(raw: str | bytes) -> Match:
    value = json.loads(raw)
    by = "url" if "url" in value else "key"
    return Match(by, value[by], tuple(value["topics"] or ()), int(value["before"]))


@dataclass(frozen=True)
class Erasures:
    client: redis.Redis
    keys: Keys
    scripts: Scripts

    def ask(self, body: Any, caller: str | None, name: str, now: int) -> dict[str, Any]:
        """Record an erasure and queue its job; `caller` the client's key (None: root)."""
        asked = parse(body, now)
        match = Match(asked.by, asked.value, self._allowed(asked.topics, caller), asked.before)
        erasure_id = f"er_{secrets.token_hex(8)}"
        created = self.scripts.run(create(self.keys, erasure_id, match, name, caller or "", now))
        if created is Created.BUS_FULL:
            raise RateLimited(f"{RUNNING_MAX} erasures are running, the most the bus "
                              "runs at once: ask again once one is done", RETRY_MS)  # fmt: skip
        if created is Created.CLIENT_FULL:
            raise RateLimited(f"this client has {RUNNING_PER_CLIENT} erasures running, the "
                              "most one may: ask again once one is done", RETRY_MS)  # fmt: skip
        return self.receipt(erasure_id, caller)

    def _allowed(self, topics: tuple[str, ...], caller: str | None) -> tuple[str, ...]:
        """The topics as asked, each known; for a client, each its own (every topic it
        publishes when it names none)."""
        known = sorted(text(t) for t in self.client.smembers(self.keys.topics))
        unknown = [t for t in topics if t not in known]
        if unknown:
            raise InvalidInput(f"no topic {unknown[0]}")
        if caller is None:
            return topics
        named = list(topics or known)
        with self.client.pipeline(transaction=False) as pipe:
            for topic in named:
                pipe.hget(self.keys.topic(topic), "publisher")
            publishers = [text(p) if p else "" for p in pipe.execute()]
        mine = [t for t, p in zip(named, publishers, strict=True) if p == caller]
        if topics and len(mine) < len(topics):
            other = next(t for t in topics if t not in mine)
            raise Forbidden(f"a client erases on the topics it publishes only: {other} is not one")
        if not mine:
            raise Forbidden("a client erases on the topics it publishes only, and this one "
                            "publishes none")  # fmt: skip
        return tuple(mine)

    def receipt(self, erasure_id: str, caller: str | None = None) -> dict[str, Any]:
        """What GET /erasures/<id> answers; a client sees its own erasures only (404)."""
        raw = self.client.hgetall(self.keys.catalog.erasure(erasure_id))
        record = {text(k): text(v) for k, v in raw.items()}
        if not record or (caller is not None and record.get("by_token") != caller):
            raise NotFound(f"no erasure {erasure_id}")
        with self.client.pipeline(transaction=False) as pipe:
            for shard in self.keys.all_shards():
                pipe.hgetall(shard.erasure(erasure_id))
            parts = pipe.execute()
        stores: dict[str, Any] = {s: dict.fromkeys(counts, 0) for s, counts in STORES.items()}
        for part in parts:
            for raw, value in part.items():
                section, _, count = text(raw).partition(".")
                if count in stores.get(section, {}):
                    stores[section][count] += int(value)
        known = lakes.lakes(self.client, self.keys)
        times = {f: int(record[f]) if record.get(f) else None
                 for f in ("created_at", "updated_at", "redis_done_at", "finished_at")}  # fmt: skip
        return {"id": erasure_id, "state": record.get("state"), "by": record.get("by"),
                **described(record["match"]), **times,
                "passes": int(record.get("passes") or 0), "stores": stores,
                "lakes": lakes.described(record, known, now_ms())}  # fmt: skip

    def listing(self, caller: str | None) -> list[dict[str, Any]]:
        """Newest first, at most LISTED; a client's own only."""
        ids = [text(i) for i in self.client.zrevrange(self.keys.catalog.erasures, 0, -1)]  # type: ignore[arg-type]
        found: list[dict[str, Any]] = []
        for erasure_id in ids:
            try:
                found.append(self.receipt(erasure_id, caller))
            except NotFound:
                continue
            if len(found) >= LISTED:
                break
        return found

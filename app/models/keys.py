"""Every Redis key busbar uses. This docstring is the data layout.

All keys start with BUSBAR_KEY_PREFIX (default `busbar:`), written `P` below. Keys that
belong to one subscriber carry the hash tag `{sub:<token>}`, so that a later Redis
Cluster mode can shard by subscriber without a data migration. Timestamps are integers,
milliseconds since the Unix epoch. Structured values are msgpack (`app/codec.py`).
Lua scripts that must find keys they cannot know in advance (the batches of whichever
subscribers a topic has) build them from the prefix with exactly these templates;
spec/app/services/test_ingest.py checks that what they write is what this class names.

Clients
-------
`P tokens` (hash)
    API token -> the client's name. The root key is never stored (BUSBAR_ROOT_KEY).
    Written by POST /api_tokens with HSETNX, so a token is never silently re-assigned;
    DELETE /api_tokens removes it together with its subscriber (`subscriber_delete.lua`).

Topics
------
`P topics` (set)
    Every topic name: claimed by a first publish, or named by a subscription.
`P topic:<name>` (hash)
    `publisher`: token of the client that published first (only it may publish);
    `counter`: every event ever accepted on the topic.
`P topic:<name>:subscribers` (hash)
    Subscriber token -> its route table for this topic (codec: `{type: [lane, ttl,
    coalesce]}`), computed at subscribe time so ingest looks routes up, never evaluates.

Subscribers
-----------
`P subscribers` (set)
    Tokens of every client with a subscription.
`P {sub:<token>}:subscriber` (hash)
    callback, uuid, timeout (ms), max_events, max_attempts (0 = forever),
    health_points (starts at 100), created_at, counts of events sent (acknowledged),
    expired, coalesced and autodropped, `failures` (failed delivery attempts),
    last_attempted_at, next_attempt_at (backoff: no delivery before), `inflight` and
    `nonce` (the batch being delivered and the random nonce its delivery drew at begin:
    only an answer naming both acknowledges or fails it), and `job`: the msgpack of
    this subscriber's delivery job `["batch", [token]]`, so Lua can schedule it
    without encoding msgpack itself.
`P {sub:<token>}:routes` (hash)
    Topic -> JSON list of the route objects the client asked for (as listed by GET
    /subscriptions). Its keys are the subscriber's topics.

Batches (per subscriber and lane; lane = priority 0..9, 10 for routes without one)
------------------------------------------------------------------------------------
`P {sub:<token>}:seq` (string)
    Batch sequence; a batch id is the next value. Kept when the subscriber is deleted, so
    an old in-flight delivery can never acknowledge a new batch with a reused id.
`P {sub:<token>}:lane:<lane>` (list)
    Batch ids of that lane, oldest first: the lane's queue.
`P {sub:<token>}:current:<lane>` (string)
    The lane's current batch id (still taking events). Deleted when the batch is
    promoted to ready: full at `max_events`, or found due by the delivery job.
`P {sub:<token>}:batch:<id>` (list)
    `[lane, created_at, attempts, entry, entry, ...]`; an entry is `<expires_at>|<event>`
    (codec), expires_at 0 = never.
`P {sub:<token>}:coalesce` (hash)
    For coalescing routes: event url -> `<batch id>:<list index>` of the queued event a
    newer one with that url replaces in place. Checked before use (the batch exists,
    holds that url there, is not in flight), moved when a batch is rewritten, removed
    when its batch leaves: one HGET + LINDEX + LSET per coalesced event.
`P {sub:<token>}:deadletters` (list)
    Events of batches that failed max_attempts times, oldest first, bounded (oldest
    trimmed and counted): `<attempts>|<failed_at>|<lane>|<last_status>|<entry>`.
`P {sub:<token>}:trash:<n>:<lane>` (list) and `P trash` (set of `<token>/<n>/<lane>`)
    A deleted subscriber's lane lists, renamed here in the step that deletes it (n is
    drawn from its batch sequence, so trashes never collide), until subscriber_purge
    has deleted their batches in bounded steps (the DELETE request itself, and Expire
    for whatever a crash left). Their events were already counted as removed.
`P batches:index:<lane>` (sorted set)
    `<token>/<id zero-padded to 12 digits>` scored by creation time (the padding orders
    batches created in the same millisecond): oldest batches of a lane first, for
    Autodrop, which starts with the lowest lane.
`P batches:gauges:event` / `P batches:gauges:batch` (hashes)
    Token -> events / batches currently queued.

Jobs (queues `main` for deliveries, `aux` for maintenance; a job is msgpack [name, args])
------------------------------------------------------------------------------------------
`P jobs:index:<q>` (set)
    Every job of queue q in any state: pushing a member already here is a no-op.
`P jobs:scheduled:<q>` (sorted set)
    Jobs scored by the time they are due.
`P jobs:instant:<q>` (list)
    Jobs due now; pushed on the left, taken from the right.
`P jobs:pending:<q>:<worker>` (list) and `P jobs:pending:index:<q>` (set)
    The job a worker thread (`<process>/<thread>`) holds, moved there atomically with
    BLMOVE, and every thread that may hold one: a thread adds itself in the round trip
    of each BLMOVE, and leaves on a clean exit or when ScrubWorkers forgets it. Only the
    holder may move a job out of its pending list (app/lua/lib/jobs.lua, the one job
    state machine); anyone else's request changes nothing and is answered `lost`.

Delivery log (read by the Spark data source in spark/)
-----------------------------------------------------
`P {sub:<token>}:first_attempt` (hash)
    Batch id -> time of its first delivery attempt, until the batch leaves.
`P deliveries:<n>` (stream), n = crc32(token) mod BUSBAR_DELIVERY_LOG_PARTITIONS
    One entry per acknowledged batch, appended by deliver_ack.lua in the same step that
    deletes the batch; approximate MAXLEN BUSBAR_DELIVERY_LOG_MAXLEN. Fields:
    subscriber (client name), priority (lane: 0-9, 10 = none), batch_id, created_at,
    first_attempt_at, delivered_at, attempts (the successful one included), events
    (msgpack array of queued entries, see codec). A subscriber always writes to the
    same partition, so its batches stay in order within one stream.

Workers and telemetry
---------------------
`P workers` (hash)
    Worker process identifier -> last heartbeat, ms by Redis's own clock (TIME), which
    is also the clock ScrubQueues judges by: silent for BUSBAR_SCRUB_AFTER_MS = dead.
    GET /workers reads it with the pending lists: a worker's threads are
    `<worker>/<n>` (main) and `<worker>/aux`; its jobs in flight are their lengths.
`P counters` (hash)
    Telemetry counters by name (events.published, events.added, events.removed, ...),
    and the batch latency histogram: `latency.le.<n>` counts acknowledged batches whose
    creation-to-acknowledgement time was at most n ms and more than n/2 (n = 1, 2, 4,
    ... 1048576), `latency.le.inf` those beyond.
`P samples:minutes` (hash)
    Per-minute samples for the console's charts (app/services/samples.py): the start
    of a minute (ms) -> JSON `{"t": <when taken, Redis TIME ms>, "c": {<counter>:
    <value>}}`, a copy of the `counters` fields the charts need, taken by the first
    Monitor run of that minute (HSETNX, so several workers agree). Entries older than
    65 minutes are deleted by the Monitor run that writes a new one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

LANES = range(11)


def log_partition(token: str, partitions: int) -> int:
    """Stable across processes and restarts (unlike hash()): a subscriber keeps its stream."""
    return zlib.crc32(token.encode()) % partitions


@dataclass(frozen=True)
class Keys:
    """Key templates under one prefix; pass an instance instead of formatting strings."""

    prefix: str = "busbar:"

    @property
    def tokens(self) -> str:
        return f"{self.prefix}tokens"

    @property
    def topics(self) -> str:
        return f"{self.prefix}topics"

    def topic(self, name: str) -> str:
        return f"{self.prefix}topic:{name}"

    def topic_subscribers(self, name: str) -> str:
        return f"{self.prefix}topic:{name}:subscribers"

    @property
    def subscribers(self) -> str:
        return f"{self.prefix}subscribers"

    def _sub(self, token: str) -> str:
        return f"{self.prefix}{{sub:{token}}}:"

    def subscriber(self, token: str) -> str:
        return f"{self._sub(token)}subscriber"

    def routes(self, token: str) -> str:
        return f"{self._sub(token)}routes"

    def seq(self, token: str) -> str:
        return f"{self._sub(token)}seq"

    def lane(self, token: str, lane: int) -> str:
        return f"{self._sub(token)}lane:{lane}"

    def current(self, token: str, lane: int) -> str:
        return f"{self._sub(token)}current:{lane}"

    def batch(self, token: str, batch_id: int | str) -> str:
        return f"{self._sub(token)}batch:{batch_id}"

    def coalesce(self, token: str) -> str:
        return f"{self._sub(token)}coalesce"

    def deadletters(self, token: str) -> str:
        return f"{self._sub(token)}deadletters"

    def trash_lane(self, token: str, n: int | str, lane: int | str) -> str:
        return f"{self._sub(token)}trash:{n}:{lane}"

    @property
    def trash(self) -> str:
        return f"{self.prefix}trash"

    def batch_index(self, lane: int | str) -> str:
        return f"{self.prefix}batches:index:{lane}"

    @property
    def event_gauge(self) -> str:
        return f"{self.prefix}batches:gauges:event"

    @property
    def batch_gauge(self) -> str:
        return f"{self.prefix}batches:gauges:batch"

    def jobs_index(self, queue: str) -> str:
        return f"{self.prefix}jobs:index:{queue}"

    def jobs_scheduled(self, queue: str) -> str:
        return f"{self.prefix}jobs:scheduled:{queue}"

    def jobs_instant(self, queue: str) -> str:
        return f"{self.prefix}jobs:instant:{queue}"

    def job_states(self, queue: str) -> list[str]:
        """Index, scheduled and instant keys of a queue: what a script that makes a job due
        needs, in the order every such script takes them."""
        return [self.jobs_index(queue), self.jobs_scheduled(queue), self.jobs_instant(queue)]

    def jobs_pending(self, queue: str, worker: str) -> str:
        return f"{self.prefix}jobs:pending:{queue}:{worker}"

    def jobs_pending_index(self, queue: str) -> str:
        return f"{self.prefix}jobs:pending:index:{queue}"

    def first_attempt(self, token: str) -> str:
        return f"{self._sub(token)}first_attempt"

    def delivery_log(self, partition: int) -> str:
        return f"{self.prefix}deliveries:{partition}"

    @property
    def workers(self) -> str:
        return f"{self.prefix}workers"

    @property
    def counters(self) -> str:
        return f"{self.prefix}counters"

    @property
    def samples(self) -> str:
        return f"{self.prefix}samples:minutes"

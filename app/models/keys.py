"""Every Redis key busbar uses. This docstring is the data layout.

All keys start with BUSBAR_KEY_PREFIX (default `busbar:`), written `P` below, followed by
a hash tag that decides where the key lives on a Redis Cluster:
- `{c}`, the catalog: clients, topics, the routing of topics to subscribers, the aux
  (maintenance) job queue, the console's samples. One slot: the topic step of a
  publish (token check, claim, count) is one script there.
- `{s:N}`, shard N = crc32(subscriber token) mod BUSBAR_SHARDS: everything about the
  subscribers of that shard (their batches, lanes, dead letters), and the shard's own
  delivery job queue, gauges, lane indexes, counters, worker heartbeats, delivery log
  stream and attempt stream. Every script about a subscriber touches its shard's slot
  only.
BUSBAR_SHARDS is fixed when the bus is first used (`P{c}:meta`); a process started with
another value refuses to start. On a single Redis every tag is on the one node and the
code is the same. Scripts receive in KEYS the keys they start from; the keys they derive
(a batch from its id, a subscriber's keys from its token) carry the same tag. Timestamps
are integers, ms since the Unix epoch. Structured values are msgpack (`app/codec.py`).

Catalog `{c}`
-------------
`P{c}:meta` (hash)
    `shards`: BUSBAR_SHARDS, written by the first process to start. `layout`: the
    number of the layout this docstring describes as the store holds it (app/release.py:
    LAYOUT), stamped by the first process to start (layout_stamp.lua: 1 for a store
    written before layouts were numbered), moved on only by a finished migration
    (layout_advance.lua; app/models/layout.py).
`P{c}:tokens` (hash)
    Client key -> the client's name: one entry a client, its key being the token it was
    created with. Its subscriber's keys, its shard, the topics it publishes and its
    operator mark are all under that key, which never changes (a token added to the
    client acts as it; docs/api.md, Client tokens). The root key is never stored
    (BUSBAR_ROOT_KEY). Written by api_token_create.lua, which never re-assigns a token.
`P{c}:aliases` (hash)
    The tokens that are not their client's key (app/models/tokens.py): a token added to
    a client (`POST /api_tokens` with `"add": true`) -> the client's key; and a client's
    key whose own token was deleted while another remained -> '' (it no longer
    authenticates, but still keys the client). Removed with the client.
`P{c}:names` (hash)
    Client name -> the key of the client that carries it, or '' while clients made before
    names were unique share it (`busbar clients shared` lists them): what makes a name in
    use, checked and written in the step that creates, renames or forgets a client
    (lib/names.lua). Its field '' (no name can be empty) holds the size `P{c}:tokens` had
    when it last matched it: a step that finds another size (a bus from before the index,
    or a process from before it that created or deleted a client since) builds it again
    from `P{c}:tokens`. An entry whose client no longer carries the name is free.
`P{c}:topics` (set)
    Every topic name: claimed by a first publish, or named by a subscription.
`P{c}:topic:<name>` (hash)
    `publisher`: token of the client that published first (only it may publish);
    `counter`: every event ever accepted on the topic; `filters`: the version of its
    rules, content filters and schemas (absent: never had any), drawn from
    `P{c}:filters:version`; `retention_s`: how long its delivered and dead-lettered
    payloads are kept (absent: BUSBAR_PAYLOAD_RETENTION_S; app/models/retention.py).
`P{c}:topic:<name>:subscribers` (hash)
    Subscriber token -> `<shard>|<route table>` (codec: `{type: [lane, ttl, coalesce]}`,
    or where content filters decide, `{type: [[lane, ttl, coalesce, filter number],
    ...]}`, the candidates in priority order), computed at subscribe time so ingest
    looks routes up and evaluates no filter itself.
`P{c}:topic:<name>:filters` (hash)
    Subscriber token -> JSON list of the content filters of its routes on the topic,
    the filter numbers of its route table counting from 1 (lib/filters.lua). The web
    matches each publish's events against them (app/services/topic_rules.py).
`P{c}:topic:<name>:schemas` (hash)
    The JSON Schemas of the topic's event types (lib/schemas.lua): `<type>` -> its
    current version, `<type>:last` -> the last version drawn, `<type>:<n>` -> a kept
    version as `<at ms>|<deprecated 0/1>|<schema JSON>`. The web checks each publish's
    events against the current ones (app/models/schemas.py).
`P{c}:filters:version` (string)
    The last rules version drawn: each change of any topic's filters or schemas takes
    the next, so a version is never used twice (not even by a topic deleted and made
    again).
`P{c}:push_keys` (hash)
    The bus's key pairs that sign a JWT per push (app/models/push_keys.py): `current` ->
    the kid that signs, `key:<kid>` -> JSON `{jwk: the public JWK, private: the private
    key's PEM sealed (app/models/sealed.py), created_at}`, and `retire:<kid>` -> ms until
    which a rotated-out key is still published in GET /.well-known/jwks.json.
`P{c}:subscribers` (hash)
    Token of every client with a subscription -> JSON list of its topics: what the
    subscription routes, so a replaced or deleted one can be unrouted however it ended.
`P{c}:auto_pause:looked` (string, expires)
    Set (SET NX PX) by the Expire run that looks for subscribers to pause
    (BUSBAR_AUTO_PAUSE_S, app/models/pausing.py): while it lives, no run looks again.
    It lives a hundredth of BUSBAR_AUTO_PAUSE_S, 5 minutes at most.
`P{c}:rate:<token>` (hash, expires)
    A publisher's token bucket (BUSBAR_PUBLISH_RATE): `level` (events it may publish
    now, up to BUSBAR_PUBLISH_BURST) and `at` (ms it was last filled). Expires once it
    would be full again, so only recent publishers have one.
`P{c}:published:<id>` (string, expires)
    A publish id whose topic step ran: a retry does not count the events again. A
    client's `Idempotency-Key` is named scoped to its publisher and topic (a digest of
    the three: app/services/ingest.py's scoped()), so two publishers' keys never meet;
    busbar's own ids for its retries are made up. The value is the request's
    fingerprint: the same id with another body is refused (422).
`P{c}:counters` (hash)
    Counters the catalog keeps: events.published.
`P{c}:samples:minutes` (hash)
    Per-minute samples for the console's charts (app/services/samples.py): the start
    of a minute (ms) -> JSON `{"t": <Redis TIME ms>, "c": {<counter>: <value>}}`, sums
    over the catalog and every shard, taken by the first Monitor run of that minute
    (HSETNX). Entries older than 65 minutes are deleted by the run that writes one.
`P{c}:replays` (sorted set)
    Every lake replay (spark/replay.py) as `<shard's key base>|<replay id>`, scored by
    when it started: what GET /replays lists; the record is that shard's `replay:<id>`.
`P{c}:operators` (set)
    Keys of the clients root marked as operators (`POST /api_tokens` with
    `"operator": true`): only they may subscribe to the bus's own topic
    `busbar_operations` (app/services/operations.py). Removed with the client.
`P{c}:origins` (hash)
    Each worker process's connection limits per callback origin, as it learnt them
    (app/delivery/origin_limit.py): worker -> JSON `{"at": <ms>, "origins": [{"origin",
    "limit", "ceiling", "open", "connecting", "waiting", "answer_ms", "reason",
    "changed_ms"}, ...]}`, the busiest ORIGINS_REPORTED, written every
    ORIGINS_REPORT_S by the worker's engine (app/services/origin_limits.py) and
    removed on its clean exit; a report older than ORIGINS_STALE_MS is not shown, and
    the next report of any worker deletes those older than ORIGINS_FORGET_MS.
`P{c}:erasures` (sorted set)
    Every erasure (app/models/erasures.py) by id, scored by when it was asked for: what
    GET /erasures lists, newest first.
`P{c}:erasures:running` (set)
    The ids of the erasures not done yet: what bounds how many may run at once (per
    client and in all), added in the step that records one (erasure_create.lua) and
    removed in the step that finishes it (erasure_done.lua).
`P{c}:erasure:<id>` (hash)
    An erasure's request and state: `id`, `by` (the client's name, or `root`), `by_token`
    (the client's key, never listed: which topics it may name), `match` (JSON: `url` or
    `key`, `topics`, `before`), `state` (running, done), `created_at`, `updated_at`,
    `finished_at`, `passes` (over every shard; another is made while a batch in flight
    holds the entity), `redis_done_at` (every Redis store erased: the lakes may go now),
    and per lake that erased it, `lake:<lake id>` (JSON: what it removed, written by
    the ingest, spark/). What each shard removed is on that shard's receipt (below).
`P{c}:lakes` (hash)
    Every lake an ingest writes (`busbar spark ingest`): `<lake id>` (the first 16 hex
    digits of the sha256 of its output path) -> JSON `{"path", "seen_at"}`, written at
    its start and at least once a minute while it runs. An erasure is done once every
    lake seen within LAKE_STALE_MS has erased it (its record's `lake:<lake id>`).
`P{c}:jobs:*:aux`, `P{c}:workers`: the aux queue and heartbeats, as for shards below.

Shard `{s:N}`
-------------
`P{s:N}:sub:<token>:subscriber` (hash)
    callback, uuid, `name` (the client's name, for logs and the delivery log), timeout
    (ms), max_events, max_attempts (0 = forever), health_points (starts at 100),
    created_at, counts of events sent (acknowledged), expired, coalesced, `filtered`
    (kept from it by its content filters, never queued), autodropped and
    `deadletters_trimmed` (dead letters trimmed from a full list), `erased` (queued
    events erasures removed), `deadletters_retired` (dead letters past their topic's
    payload retention), `failures` (failed
    delivery attempts), last_attempted_at,
    next_attempt_at (backoff: no delivery before), `streak` (failures in a row since
    the last success; absent at 0), `streak_at` (ms of the first of them: the circuit
    opens only once they span BUSBAR_CIRCUIT_OUTAGE_MS), `ok_at` (ms of the last 2xx: within
    BUSBAR_RETRY_ALIVE_MS the failure policy takes the endpoint for alive) and
    `circuit_at` (ms the circuit opened; absent while closed: deliver_fail opens it,
    deliver_ack closes it, see docs/delivery.md) and `probe_ms` (its probe interval then:
    a partition that begins while it is open claims the probe one interval ahead),
    `paused_at` and `paused_by` (ms, and the client's name or `root`: while set, nothing
    is sent and the job is never made due; app/models/pausing.py), `attempts.<outcome>`
    (attempts counted by outcome, app/models/attempts.py),
    `abandoned_at` (the `last_attempted_at` of the last flight a scrub recorded as
    abandoned, so it is recorded once), `inflight` and `nonce` (the batch
    being delivered and the random nonce its delivery drew at begin: only an answer
    naming both acknowledges or fails it), `more` (a broker flight's other batches, ids
    space-separated in lane order: app/lua/lib/delivery.lua's gather; absent for one
    batch), and `job`: the msgpack of this subscriber's
    delivery job `["batch", [token]]`, so Lua can schedule it without encoding msgpack.
    `event_ids` ('1': each delivered event carries an `id`). Signing: `secret_salt`, made
    at first subscribe (hex, 16 random bytes; the secret is derived from it with
    BUSBAR_SECRET_KEY and never stored, see app/models/secrets.py), and after a rotation
    `previous_salt` with `previous_until` (ms): until then deliveries carry both signatures.
    `concurrency` (absent: 1), `partitions` (4 x concurrency, absent at 1), `flying`
    (partitions with a delivery in flight, at most `concurrency`; app/lua/lib/delivery.lua)
    and, while a change of concurrency drains, `draining` (the old one). `headers`: the
    subscriber's own headers, JSON `[[name, value, secret 0/1, set_at], ...]`, a secret's
    value sealed (app/models/sealed.py); `auth`: how its callback authenticates the bus
    beyond the Basic uuid, JSON (`{"type": "jwt", "audience": ...}`: a token per push,
    app/models/push_keys.py; `{"type": "oauth2", "token_url", "client_id", "scope",
    "audience", "kind", "secret" (sealed), "set_at"}`: client credentials,
    app/models/oauth2.py). `transforms`: its routes' transforms, JSON `{topic: [[lane,
    types, filter, transform], ...]}` for each topic one of whose routes has one (every
    route of that topic, as listed; app/models/route.py's transform_table), absent when
    none has; `transform_version`, one more at each change of it (the attempt log names
    it); `transformed_out`, events its transforms gave nothing for (never sent).
`P{s:N}:sub:<token>:part:<n>.<p>:` + `lane:<lane>`, `current:<lane>`, `coalesce`, `flight`
    Partition p of the n = `partitions` of a subscriber of `concurrency` above 1
    (app/lua/lib/partitions.lua; its pid is `<token>#<n>.<p>`): its lanes, current
    batches and coalescing map, as the subscriber's own (below) are at concurrency 1,
    and its `flight` hash: `job` (`["batch", [pid]]`), `inflight`, `nonce`, `more`,
    `last_attempted_at`, `abandoned_at`, `next_attempt_at` and `streak`, which at
    concurrency 1 are the subscriber hash's own fields. Batch ids come from the
    subscriber's one `seq`, so `batch:<id>`, `first_attempt` and `replayed` stay the
    subscriber's; index members and attempt log entries name the partition. Partition
    n (`part:<n>.<n>:`, no key hashes there) is the layout's aside partition, where a
    failing key's events step aside (deliver_fail.lua): its `keys` (hash) counts, for
    each ordering key set aside, its entries queued there; such a key's events queue
    there too, until its count falls to 0 (lib/partitions.lua).
`P{s:N}:sub:<token>:waiting` (sorted set)
    Pids of partitions with a batch ready while `concurrency` were in flight, in line
    for a place: scored by when they began to wait, less 250 ms per doubling of their
    batches queued (lib/places.lua). Their jobs are settled; each delivery that ends
    wakes the first in line, who takes the place unless someone ahead of it does.
`P{s:N}:sub:<token>:draining` (set)
    While a change of concurrency drains: the pids of the old layout's partitions that
    still hold batches; the new layout delivers once the last has none (subscribe.lua).
`P{s:N}:sub:<token>:routes` (hash)
    Topic -> JSON list of the route objects the client asked for (as listed by GET
    /subscriptions).
`P{s:N}:sub:<token>:seq` (string)
    Batch sequence; a batch id is the next value. Kept when the subscriber is deleted, so
    an old in-flight delivery can never acknowledge a new batch with a reused id.
`P{s:N}:sub:<token>:lane:<lane>` (list)
    Batch ids of that lane (priority 0..9, 10 for routes without one), oldest first.
`P{s:N}:sub:<token>:current:<lane>` (string)
    The lane's current batch id (still taking events). Deleted when the batch is
    promoted to ready: full at `max_events` or BATCH_BYTES, or found due by the
    delivery job.
`P{s:N}:sub:<token>:batch:<id>` (list)
    `[lane, created_at, attempts, entry, entry, ...]`; an entry is `<expires_at>|<event>`
    (codec), expires_at 0 = never. The header and the lane count are BATCH_HEADER and
    LANES below; the scripts get them as Lua constants (lua_constants).
`P{s:N}:sub:<token>:coalesce` (hash)
    For coalescing routes: event url -> `<batch id>:<list index>` of the latest queued
    event of that url. Checked before use (the batch exists, holds that url there, is
    not in flight), moved when a batch is rewritten, removed when its batch leaves.
`P{s:N}:sub:<token>:deadletters` (list)
    Events of batches that failed max_attempts times, oldest first, bounded (oldest
    trimmed and counted): `<attempts>|<failed_at>|<lane>|<last_status>|<entry>`.
`P{s:N}:sub:<token>:attempts` (stream)
    The subscriber's attempt log (app/models/attempts.py): one entry per delivery
    attempt, appended by the script that settles it (deliver_ack, deliver_fail), at
    most BUSBAR_ATTEMPT_LOG entries and none older than BUSBAR_ATTEMPT_LOG_AGE_S. The
    entry id is when (Redis's clock); fields: batch, events, lane, attempt (the batch's
    attempt number), worker (`<process>/<slot>`), duration_ms, status (as the send step
    wrote it: a code, `<code> retry-after <ms>`, or a reason such as `timeout`), body
    (the answer's first KiB), and `partition` and `transform_version` when it had them.
`P{s:N}:sub:<token>:oauth_token` (hash, expires)
    A subscriber's OAuth2 access token, cached for every worker (oauth_token.lua,
    app/delivery/token_source.py): `token` (sealed, app/models/sealed.py), `fp` (the
    fingerprint of the stored `auth` it was fetched under), `refresh_at` and
    `expires_at` (ms), and while a worker fetches, `claim` (the worker) and
    `claim_until` (ms). Expires with the token or the claim, whichever is later.
`P{s:N}:sub:<token>:first_attempt` (hash)
    Batch id -> time of its first delivery attempt, until the batch leaves.
`P{s:N}:sub:<token>:replayed` (hash)
    Batch id -> the id of the lake replay that queued it (replay_queue.lua), until the
    batch leaves; its delivery carries the id in a `Busbar-Replay` header.
`P{s:N}:sub:<token>:filled` (hash)
    Batch id -> bytes of the entries appended to it that count (those `max_events` of
    which would reach BATCH_BYTES), while it is current: at BATCH_BYTES it is full
    (lib/batches.lua's batch_append); removed when it is full or leaves.
`P{s:N}:sub:<token>:trash:<n>:<lane>` (list) and `P{s:N}:trash` (set of `<token>/<n>/<lane>`)
    A deleted subscriber's lane lists, renamed here in the step that deletes it (n is
    drawn from its batch sequence, so trashes never collide), until subscriber_purge
    has deleted their batches in bounded steps (the DELETE request itself, and Expire
    for whatever a crash left). Their events were already counted as removed.
`P{s:N}:batches:index:<lane>` (sorted set)
    `<pid>/<id zero-padded to 12 digits>` (pid: the token, or the partition's) scored by
    creation time: the shard's oldest batches of a lane first, for Autodrop, which
    starts with the lowest lane.
`P{s:N}:batches:gauges:event` / `P{s:N}:batches:gauges:batch` (hashes)
    Token -> events / batches currently queued.
`P{s:N}:published:<id>:<first token>` (string, expires)
    The shard step of publish id `<id>` that began with that subscriber ran: a retry
    of the step queues nothing twice.
`P{s:N}:replay:<id>` (hash)
    A lake replay whose target lives on this shard, so each step moves its position in
    the script that queues: `id`, `by` (who started it), `target` (the client's name),
    `token` (the target's; never listed), `selection` (JSON), `lane` (-1: each route's), `state`
    (running, stopped, done, failed), `selected`, `position` (events of the selection
    consumed so far), `as_of` (ms: the lake's rows delivered before it, fixed at the first
    start), `lake`, `started_at`, `updated_at`, `note` (why it failed or stopped).
`P{s:N}:erasure:<id>` (hash)
    An erasure's receipt on this shard, written by the script of each step in the step
    (app/lua/erase_*.lua), so a step repeated after a crash counts nothing twice: counts
    (`queued.events`, `queued.batches_removed`, `queued.batches_rewritten`,
    `coalescing.entries`, `deadletters.events`, `attempt_log.entries`,
    `deliveries.events`, `deliveries.entries_removed`, `deliveries.entries_rewritten`,
    `attempts.entries`) and where each step goes on (`q:<pid>`, `dl:<token>`,
    `log:<token>`, `deliveries`, `deliveries.sweep`, `attempts`), the per-pass ones
    cleared for the next pass. Deleted with the erasure's record.
`P{s:N}:erasure:<id>:batches` (set)
    `<client name>/<batch id>` of every batch found holding the entity: their attempts
    are erased too (an answer's body may echo what it was sent).
`P{s:N}:counters` (hash)
    The shard's telemetry counters (events.added, delivery.events, ...), and the batch
    latency histogram: `latency.le.<n>` counts acknowledged batches whose creation to
    acknowledgement took at most n ms and more than n/2 (n = 1, 2, 4, ... 1048576),
    `latency.le.inf` those beyond. GET /metrics adds up the catalog's and every shard's.
`P{s:N}:deliveries` (stream)
    The shard's delivery log: one entry per acknowledged batch, appended by
    deliver_ack.lua in the step that deletes the batch; approximate MAXLEN
    BUSBAR_DELIVERY_LOG_MAXLEN. Fields: subscriber (client name), priority (lane),
    batch_id, created_at, first_attempt_at, delivered_at, attempts, events (msgpack array
    of the entries sent: as queued, or where a route's transform changed one, with the
    data sent and the id it had; app/delivery/shaping.py) and, only when a transform
    changed any, source (msgpack array of the same events as queued, in the same order).
    A batch a transform left nothing to send is not logged. A subscriber always writes
    to its shard's stream, in order.
`P{s:N}:deliveries:erased` / `P{s:N}:attempts:erased` (hashes)
    What erasures took out of the delivery log / the attempt stream (XDEL), for the
    lake's readers (spark/ranges.py): `n`, entries ever taken out (the stream's length
    no longer tells its trimmed ones alone), and per entry id taken out, '' (nothing of
    it left) or the msgpack of its fields as XRANGE gives them with the entity's events
    blanked (''), read in its place. Kept (a reader needs them to tell an erased entry
    from a trimmed one); rewritten again by a later erasure that matches them.
`P{s:N}:attempts` (stream)
    The shard's attempt stream, which the lake's attempts table is written from: every
    attempt a subscriber's attempt log records (whatever BUSBAR_ATTEMPT_LOG keeps),
    appended by the same script in the same step (deliver_ack, deliver_fail,
    job_scrub_many for `abandoned`), with the same fields plus `subscriber`, the
    client's name (never its token); a deleted subscriber's attempts stay. Approximate
    MAXLEN BUSBAR_ATTEMPT_STREAM_MAXLEN, 0 writes none; Autodrop trims it first, with the
    delivery log. The entry id is when (Redis's clock).

Operational events (the catalog `{c}` and every shard `{s:N}`)
---------------------------------------------------------------
`T operations` (stream), T the tag (`P{c}:` or `P{s:N}:`)
    What happened to the bus that an operator wants told (app/services/operations.py):
    appended in the step that makes it true (a shard's scripts: a subscriber paused or
    resumed, its circuit opened or closed, events dead-lettered or dropped; the catalog:
    a worker found dead), approximate MAXLEN OPERATIONS_KEPT. Fields: `kind`, `data`
    (JSON, naming the subscriber by its client name, never its token). The Operations
    job publishes them, in order, to the topic `busbar_operations`.
`T operations:relay` (hash)
    How far the Operations job has published that stream: `cursor` (the last entry
    published) and, while a step is under way, `upto` (the last entry of the step): a
    step repeated after a crash publishes exactly the same entries under the same
    publish id, so the publish's own dedupe drops the repeat.

Jobs (queue `main`, deliveries, on every shard; queue `aux`, maintenance, in the catalog)
------------------------------------------------------------------------------------------
`T jobs:index:<q>` (set), T the queue's tag (`P{s:N}:` or `P{c}:`)
    Every job of queue q in any state: pushing a member already here is a no-op.
`T jobs:scheduled:<q>` (sorted set)
    Jobs scored by the time they are due.
`T jobs:scheduled:<q>:bell` (list, one item at most)
    Rung (the item pushed) when a job becomes the earliest scheduled: the workers'
    schedulers sleep until the earliest job they know of, blocked on it (BLPOP), and
    wake to promote an earlier one on time (workers/scheduler.py).
`T jobs:instant:<q>` (list)
    Jobs due now; pushed on the left, taken from the right.
`T jobs:pending:<q>:<worker>` (list) and `T jobs:pending:index:<q>` (set)
    The job a worker thread (`<process>/<thread>`) holds, moved there atomically with
    BLMOVE, and every thread that may hold one: a thread adds itself in the round trip
    of each BLMOVE, and leaves on a clean exit or when ScrubWorkers forgets it. Only the
    holder may move a job out of its pending list (app/lua/lib/jobs.lua, the one job
    state machine); anyone else's request changes nothing and is answered `lost`.
`T workers` (hash)
    Worker process identifier -> last heartbeat, ms by Redis's own clock (TIME), which
    is also the clock ScrubQueues judges by: silent for BUSBAR_SCRUB_AFTER_MS = dead.
    Each tag has its own, beside the pending lists it judges, so a scrub is one script.
`T fence` (string)
    Written only with BUSBAR_REDIS_MIN_REPLICAS set, by the web's replica barrier
    (app/models/replicas.py): a write after a request's own on that node, so the WAIT
    that follows on the same connection covers all of them.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

from config.settings import Settings

LEGACY_LANE = 10  # below priority 9: routes without a priority, and plain topic names
LANES = range(LEGACY_LANE + 1)
OPERATIONS_KEPT = 10_000  # approximate MAXLEN of each operations stream
# The publisher of the bus's own topic (app/services/operations.py): outside the token
# pattern (app/models/tokens.py), so no client can be it, or authenticate as it.
SYSTEM_PUBLISHER = "@busbar"
# the head of a batch list, before its entries
BATCH_HEADER = ("lane", "created_at", "attempts")
# A batch closes at `max` events or at this many bytes of entries, whichever comes first
# (the entry that reaches it is its last; at most twice this and one event, as
# lib/batches.lua counts), so every script that copies a whole batch stays short whatever
# the events' size (docs/semantics.md, Bounded scripts).
BATCH_BYTES = 1024 * 1024
# Bytes a bounded script reads or writes in one call, about (beside its budget of events,
# which alone bounds nothing once events are large): about 12 ms of Redis's time.
SCRIPT_BYTES = 4 * 1024 * 1024


def lua_constants() -> str:
    """The layout's numbers as Lua locals, prepended to every script (app/lua), so the
    lane count and the batch header are written once, here, for Python and Lua alike:
    LAST_LANE, BATCH_HEADER (its length), and BATCH_LANE, BATCH_CREATED, BATCH_ATTEMPTS
    (0-based positions, as LINDEX takes them), BATCH_BYTES, SCRIPT_BYTES,
    OPERATIONS_KEPT and SYSTEM_PUBLISHER."""
    positions = "".join(
        f"local BATCH_{name.split('_')[0].upper()} = {i}\n" for i, name in enumerate(BATCH_HEADER)
    )
    return (
        f"local LAST_LANE = {LEGACY_LANE}\nlocal BATCH_HEADER = {len(BATCH_HEADER)}\n"
        f"local BATCH_BYTES = {BATCH_BYTES}\nlocal SCRIPT_BYTES = {SCRIPT_BYTES}\n"
        f"local OPERATIONS_KEPT = {OPERATIONS_KEPT}\n"
        f"local SYSTEM_PUBLISHER = '{SYSTEM_PUBLISHER}'\n{positions}"
    )


MAIN = "main"
AUX = "aux"


def owner(pid: str) -> str:
    """The subscriber's token in a partition's pid (`<token>#<n>.<p>`), or the token itself."""
    return pid.partition("#")[0]


def shard_of(token: str, shards: int) -> int:
    """Stable across processes and restarts (unlike hash()): a subscriber keeps its shard."""
    return zlib.crc32(token.encode()) % shards


@functools.lru_cache(maxsize=4096)
def _shard_place(prefix: str, n: int) -> Place:
    """A delivery names a shard's keys several times; a Place is immutable, so one serves."""
    return Place(f"{prefix}{{s:{n}}}:", n)


@dataclass(frozen=True)
class Place:
    """The keys under one hash tag: the catalog (`P{c}:`) or a shard (`P{s:N}:`)."""

    base: str
    shard: int | None = None

    @property
    def counters(self) -> str:
        return f"{self.base}counters"

    @property
    def workers(self) -> str:
        return f"{self.base}workers"

    @property
    def origins(self) -> str:
        return f"{self.base}origins"

    def jobs_index(self, queue: str) -> str:
        return f"{self.base}jobs:index:{queue}"

    def jobs_scheduled(self, queue: str) -> str:
        return f"{self.base}jobs:scheduled:{queue}"

    def jobs_instant(self, queue: str) -> str:
        return f"{self.base}jobs:instant:{queue}"

    def jobs_schedule_bell(self, queue: str) -> str:
        return f"{self.base}jobs:scheduled:{queue}:bell"

    def job_states(self, queue: str) -> list[str]:
        """Index, scheduled and instant keys of a queue: what a script that makes a job due
        needs, in the order every such script takes them."""
        return [self.jobs_index(queue), self.jobs_scheduled(queue), self.jobs_instant(queue)]

    def jobs_pending(self, queue: str, worker: str) -> str:
        return f"{self.base}jobs:pending:{queue}:{worker}"

    def jobs_pending_index(self, queue: str) -> str:
        return f"{self.base}jobs:pending:index:{queue}"

    def published(self, publish_id: str) -> str:
        return f"{self.base}published:{publish_id}"

    @property
    def replays(self) -> str:
        """Every lake replay, by start time: catalog only."""
        return f"{self.base}replays"

    def replay(self, replay_id: str) -> str:
        """A lake replay's record: on its target's shard."""
        return f"{self.base}replay:{replay_id}"

    def rate(self, token: str) -> str:
        """A publisher's token bucket: catalog only."""
        return f"{self.base}rate:{token}"

    # shards only

    @property
    def event_gauge(self) -> str:
        return f"{self.base}batches:gauges:event"

    @property
    def batch_gauge(self) -> str:
        return f"{self.base}batches:gauges:batch"

    def batch_index(self, lane: int | str) -> str:
        return f"{self.base}batches:index:{lane}"

    @property
    def fence(self) -> str:
        return f"{self.base}fence"

    @property
    def trash(self) -> str:
        return f"{self.base}trash"

    @property
    def delivery_log(self) -> str:
        return f"{self.base}deliveries"

    @property
    def operations(self) -> str:
        """Operational events: the catalog's and each shard's."""
        return f"{self.base}operations"

    @property
    def operations_relay(self) -> str:
        return f"{self.base}operations:relay"

    @property
    def delivery_log_erased(self) -> str:
        """What erasures took out of the delivery log, for the lake's readers."""
        return f"{self.base}deliveries:erased"

    @property
    def attempt_stream_erased(self) -> str:
        return f"{self.base}attempts:erased"

    @property
    def lakes(self) -> str:
        """The lakes ingests write, for erasures: catalog only."""
        return f"{self.base}lakes"

    @property
    def erasures(self) -> str:
        """Every erasure, by when it was asked for: catalog only."""
        return f"{self.base}erasures"

    @property
    def erasures_running(self) -> str:
        return f"{self.base}erasures:running"

    def erasure(self, erasure_id: str) -> str:
        """The request and state in the catalog; a shard's receipt on each shard."""
        return f"{self.base}erasure:{erasure_id}"

    def erasure_batches(self, erasure_id: str) -> str:
        return f"{self.base}erasure:{erasure_id}:batches"

    @property
    def attempt_stream(self) -> str:
        """Every attempt on the shard, for the lake; the subscribers' own logs are `attempts`."""
        return f"{self.base}attempts"

    def sub_base(self, token: str) -> str:
        """What every key of one of this shard's subscribers starts with."""
        return f"{self.base}sub:{token}:"


@dataclass(frozen=True)
class Keys:
    """Key templates under one prefix and shard count; pass an instance around instead
    of formatting strings."""

    prefix: str = "busbar:"
    shards: int = 1

    @functools.cached_property
    def catalog(self) -> Place:
        """Made once an instance: a publish names it nine times (its __dict__ holds it,
        which a frozen dataclass allows cached_property to write)."""
        return Place(f"{self.prefix}{{c}}:")

    def shard(self, n: int) -> Place:
        return _shard_place(self.prefix, n)

    def all_shards(self) -> list[Place]:
        return [self.shard(n) for n in range(self.shards)]

    def shard_of(self, token: str) -> int:
        """A subscriber's shard, and its partitions' (a pid names its token first)."""
        return shard_of(owner(token), self.shards)

    def home(self, token: str) -> Place:
        """The shard a subscriber's keys, job and counters live on."""
        return self.shard(self.shard_of(token))

    def queue_place(self, queue: str, shard: int | None) -> Place:
        """Where a job queue lives: `main` on every shard, `aux` in the catalog."""
        if queue == AUX:
            return self.catalog
        if shard is None:
            raise ValueError(f"queue {queue} lives on a shard: name it")
        return self.shard(shard)

    # catalog

    @property
    def meta(self) -> str:
        return f"{self.catalog.base}meta"

    @property
    def tokens(self) -> str:
        return f"{self.catalog.base}tokens"

    @property
    def aliases(self) -> str:
        return f"{self.catalog.base}aliases"

    @property
    def names(self) -> str:
        return f"{self.catalog.base}names"

    @property
    def operators(self) -> str:
        return f"{self.catalog.base}operators"

    @property
    def topics(self) -> str:
        return f"{self.catalog.base}topics"

    def topic(self, name: str) -> str:
        return f"{self.catalog.base}topic:{name}"

    def topic_subscribers(self, name: str) -> str:
        return f"{self.catalog.base}topic:{name}:subscribers"

    def topic_filters(self, name: str) -> str:
        return f"{self.catalog.base}topic:{name}:filters"

    def topic_schemas(self, name: str) -> str:
        return f"{self.catalog.base}topic:{name}:schemas"

    @property
    def filters_version(self) -> str:
        return f"{self.catalog.base}filters:version"

    @property
    def subscribers(self) -> str:
        return f"{self.catalog.base}subscribers"

    @property
    def auto_pause_looked(self) -> str:
        return f"{self.catalog.base}auto_pause:looked"

    @property
    def push_keys(self) -> str:
        return f"{self.catalog.base}push_keys"

    @property
    def samples(self) -> str:
        return f"{self.catalog.base}samples:minutes"

    # one subscriber

    def sub_base(self, token: str) -> str:
        """Of the subscriber, whether `token` is its token or one of its partitions' pids."""
        return self.home(token).sub_base(owner(token))

    def part_base(self, pid: str) -> str:
        """What the keys of one partition start with: the subscriber's own at concurrency 1."""
        token, _, part = pid.partition("#")
        return f"{self.sub_base(token)}part:{part}:" if part else self.sub_base(token)

    def flight(self, pid: str) -> str:
        """A partition's flight hash: the subscriber hash at concurrency 1."""
        return f"{self.part_base(pid)}flight" if "#" in pid else self.subscriber(pid)

    def draining(self, token: str) -> str:
        return f"{self.sub_base(token)}draining"

    def waiting(self, token: str) -> str:
        return f"{self.sub_base(token)}waiting"

    def subscriber(self, token: str) -> str:
        return f"{self.sub_base(token)}subscriber"

    def routes(self, token: str) -> str:
        return f"{self.sub_base(token)}routes"

    def seq(self, token: str) -> str:
        return f"{self.sub_base(token)}seq"

    def lane(self, pid: str, lane: int) -> str:
        return f"{self.part_base(pid)}lane:{lane}"

    def current(self, pid: str, lane: int) -> str:
        return f"{self.part_base(pid)}current:{lane}"

    def batch(self, token: str, batch_id: int | str) -> str:
        return f"{self.sub_base(token)}batch:{batch_id}"

    def coalesce(self, pid: str) -> str:
        return f"{self.part_base(pid)}coalesce"

    def aside_keys(self, pid: str) -> str:
        """The ordering keys set aside in the aside partition `pid` (`<token>#<n>.<n>`),
        each with its entries queued there."""
        return f"{self.part_base(pid)}keys"

    def deadletters(self, token: str) -> str:
        return f"{self.sub_base(token)}deadletters"

    def attempts(self, token: str) -> str:
        return f"{self.sub_base(token)}attempts"

    def oauth_token(self, token: str) -> str:
        return f"{self.sub_base(token)}oauth_token"

    def first_attempt(self, token: str) -> str:
        return f"{self.sub_base(token)}first_attempt"

    def replayed(self, token: str) -> str:
        return f"{self.sub_base(token)}replayed"

    def filled(self, token: str) -> str:
        return f"{self.sub_base(token)}filled"

    def trash_lane(self, token: str, n: int | str, lane: int | str) -> str:
        return f"{self.sub_base(token)}trash:{n}:{lane}"


def keys_for(settings: Settings) -> Keys:
    return Keys(settings.key_prefix, settings.shards)

-- Shared by the delivery scripts (deliver_begin, deliver_ack, deliver_fail, deliver_take).
-- A delivery is named by a context `d` (delivery_ctx): the subscriber (lib/batches.lua's
-- `s`), now, the job, and its keys d.k:
--   [1] the subscriber hash           [2] the shard's event gauge hash
--   [3] the shard's batch gauge hash  [4] the shard's counters hash
--   [5..7] the shard's jobs index set, scheduled sorted set, instant list (main)
--   [8] the worker's pending list     [9] the subscriber's dead letters list
--   [10] the shard's delivery log stream [11] the shard's attempt stream
-- deliver_begin, _ack and _fail receive those keys as their KEYS; deliver_take and
-- job_scrub_many derive them (same hash tag) for whichever subscriber's job they took.
-- Every step ends by settling the job in the same script (scheduled at the next due
-- time, instant, or gone when nothing is queued), so a batch is never left without a
-- job and a job never runs for nothing: ingest and acknowledgement cannot race.

local function delivery_ctx(shard_base, pid, now, job, keys, pending)
  local s = sub_ctx(shard_base, pid)
  keys = keys or {s.base .. 'subscriber', s.events, s.batches, shard_base .. 'counters',
    shard_base .. 'jobs:index:main', shard_base .. 'jobs:scheduled:main',
    shard_base .. 'jobs:instant:main', pending, s.base .. 'deadletters',
    shard_base .. 'deliveries', shard_base .. 'attempts'}
  -- d.part: a partition of a subscriber of concurrency > 1 (its flight hash is its own)
  return {s = s, base = s.base, q = s.q, f = s.flight, token = s.token, now = now, job = job,
    k = keys, part = s.flight ~= keys[1]}
end

-- The earliest time something queued in the partition is due, or nil when nothing is.
local function next_due(d, max_events, timeout)
  return queue_due(d.s, d.now, max_events, timeout)
end

-- Release the held job and put it where it belongs now; returns the due time or -1.
local function settle(d, due)
  job_settle(d.k[5], d.k[6], d.k[7], d.k[8], d.job, due, d.now)
  return due or -1
end

-- Settle by what is queued, not before `not_before` (a backoff), if given; with
-- nothing due while the subscriber is paused (subscriber_pause.lua).
local function settle_from_queue(d, not_before)
  local meta = redis.call('HMGET', d.k[1], 'max_events', 'timeout', 'paused_at')
  if not meta[1] or meta[3] then return settle(d, nil) end
  local due = next_due(d, tonumber(meta[1]), tonumber(meta[2]))
  if due and not_before and due < not_before then due = not_before end
  return settle(d, due)
end

-- The first step of ack and fail: the answer must come from the delivery that is in
-- flight. Returns nil when it does; otherwise the reply to give: {'lost'} (this worker
-- no longer holds the job: nothing changes), {'gone', -1} (the subscriber was deleted
-- meanwhile) or {'stale', due} (another delivery's answer, or a batch id reused after
-- data loss: no batch is touched, the held job is settled). When it does, d.more lists the
-- batches gathered into the flight after `id` (begin_delivery), in lane order.
local function fence(d, id, nonce)
  if not job_held(d.k[8], d.job) then return {'lost'} end
  if redis.call('HEXISTS', d.k[1], 'max_events') == 0 then return {'gone', settle(d, nil)} end
  local flight = redis.call('HMGET', d.f, 'inflight', 'nonce', 'more')
  if flight[1] ~= id or flight[2] ~= nonce
      or redis.call('EXISTS', d.base .. 'batch:' .. id) == 0 then
    return {'stale', settle_from_queue(d, nil)}
  end
  -- d.more: the batches gathered into this flight after `id`, in their order (begin)
  d.more = {}
  if flight[3] then
    for more in string.gmatch(flight[3], '%S+') do d.more[#d.more + 1] = more end
  end
  redis.call('HDEL', d.f, 'inflight', 'nonce', 'more')
  if d.part then place_free(d) end  -- a partition: lib/places.lua
  return nil
end

-- The fields `names` of hash `key`, as a table by name (absent fields nil): a reply read
-- by name, not by its place in an HMGET.
local function hash_fields(key, names)
  local values = redis.call('HMGET', key, unpack(names))
  local found = {}
  for i, name in ipairs(names) do found[name] = values[i] or nil end
  return found
end

-- Count one attempt by outcome on the subscriber (`attempts.<outcome>`), and append it,
-- in the step that settles it, to the subscriber's attempt log (app/models/keys.py:
-- `attempts`; at most `log.kept` entries, none older than `log.oldest` ms; `kept` 0
-- keeps none) and to the shard's attempt stream d.k[11], the lake's (approximate MAXLEN
-- `log.maxlen`, 0 = off), which names the subscriber by its client name, never its
-- token. `a`: batch, events, lane, attempt, worker, took (ms), status (the result's text:
-- app/models/attempt_result.py), outcome (its class), wait (what a 429/503 asked, ms, or
-- '' or nil), body.
local function record_attempt(d, log, a)
  redis.call('HINCRBY', d.k[1], 'attempts.' .. a.outcome, 1)
  local common = {'batch', a.batch, 'events', a.events, 'lane', a.lane, 'attempt', a.attempt,
    'worker', a.worker, 'duration_ms', a.took, 'status', a.status, 'body', a.body}
  if a.wait and a.wait ~= '' then
    common[#common + 1], common[#common + 2] = 'retry_after_ms', a.wait
  end
  if log.kept > 0 then
    local key = d.base .. 'attempts'
    local fields = {unpack(common)}
    if d.part then  -- partitioned: which partition (`<n>.<p>`) the attempt was
      fields[#fields + 1], fields[#fields + 2] = 'partition', string.match(d.s.pid, '#(.*)$')
    end
    if a.transform and a.transform ~= '' then  -- the version of the transforms it ran
      fields[#fields + 1], fields[#fields + 2] = 'transform_version', a.transform
    end
    redis.call('XADD', key, 'MAXLEN', log.kept, '*', unpack(fields))
    redis.call('XTRIM', key, 'MINID', math.max(0, log.oldest))
  end
  if log.maxlen > 0 then
    redis.call('XADD', d.k[11], 'MAXLEN', '~', log.maxlen, '*', 'subscriber',
      redis.call('HGET', d.k[1], 'name') or '(deleted client)', unpack(common))
  end
end

-- The attempt log's bounds as a script's ARGV carry them: attempts kept per subscriber,
-- the oldest kept (ms), the shard attempt stream's approximate MAXLEN.
local function attempt_bounds(kept, oldest, maxlen)
  return {kept = tonumber(kept), oldest = tonumber(oldest), maxlen = tonumber(maxlen)}
end

-- A delivery job a scrub gave back (its holder died, or is recovering after an error):
-- the batch its subscriber has in flight, begun and never settled, is an attempt cut
-- short, recorded once as `abandoned`. The in-flight mark stays (the next begin replaces
-- it; an answer from the old holder is fenced off, as it no longer holds the job).
local function record_abandoned(shard_base, job, log, holder, now)
  local ok, decoded = pcall(cmsgpack.unpack, job)
  if not ok or type(decoded) ~= 'table' or decoded[1] ~= 'batch' then return end
  local d = delivery_ctx(shard_base, decoded[2][1], now, job, nil, nil)
  local flight = redis.call('HMGET', d.f, 'inflight', 'last_attempted_at', 'abandoned_at', 'more')
  if not flight[1] or not flight[2] or flight[2] == flight[3] then return end
  redis.call('HSET', d.f, 'abandoned_at', flight[2])  -- recorded: not again
  local ids = {flight[1]}  -- and those gathered into the flight with it
  for more in string.gmatch(flight[4] or '', '%S+') do ids[#ids + 1] = more end
  for _, id in ipairs(ids) do
    local key = d.base .. 'batch:' .. id
    if redis.call('EXISTS', key) == 1 then
      local header = redis.call('LRANGE', key, 0, BATCH_HEADER - 1)
      record_attempt(d, log, {batch = id,
        events = redis.call('LLEN', key) - BATCH_HEADER, lane = header[BATCH_LANE + 1],
        attempt = tonumber(header[BATCH_ATTEMPTS + 1]) + 1, worker = holder,
        took = math.max(0, now - tonumber(flight[2])), status = 'abandoned',
        outcome = 'abandoned', body = ''})
    end
  end
end

-- Health points after adding `delta`, within 0..100.
local function health(d, delta)
  local hp = tonumber(redis.call('HGET', d.k[1], 'health_points') or '100') + delta
  return math.max(0, math.min(100, hp))
end

-- Append `letters` (`<attempts>|<failed_at>|<lane>|<status>|<entry>` each) to the dead
-- letters (keys[9]) and count them; the list trimmed to its `max_dead` newest, the
-- trimmed counted on the shard and the subscriber (keys[4], keys[1]).
local function dead_letters_push(keys, letters, max_dead)
  for i = 1, #letters, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', keys[9], unpack(letters, i, math.min(i + 999, #letters)))
  end
  local over = redis.call('LLEN', keys[9]) - max_dead
  if over > 0 then
    redis.call('LTRIM', keys[9], over, -1)
    redis.call('HINCRBY', keys[4], 'deadletters.trimmed', over)
    redis.call('HINCRBY', keys[1], 'deadletters_trimmed', over)
  end
  redis.call('HINCRBY', keys[4], 'events.deadlettered', #letters)
end

-- The most events one flight to a broker destination carries (gather): the ack of that
-- many one-event batches must stay a short script (bench.scripts' bound is 50 ms).
local GATHER_EVENTS = 100

-- The batches after `id` in lane `lane` that join its flight to a broker destination
-- (`m`, the subscriber's fields, names one and no transforms): each message is one
-- event whatever the batches, so at `max: 1` a flight of one batch would cost the
-- worker two scripts and a turn of its loop per message. Those that follow `id` in the
-- lane, ready as it is (not the open batch unless full or timed out), with no expired
-- event (the next begin drops those first), up to GATHER_EVENTS with `first` events.
-- Returns their ids and, for the reply, {id, created_at, attempts, {entry...}} each.
-- Their ack or fail settles them with `id` (deliver_ack, deliver_fail: d.more).
local function gather(d, m, lane, first)
  local ids, found = {}, {}
  if not m.destination or (m.transforms or '') ~= '' then return ids, found end
  local list, total = d.q .. 'lane:' .. lane, first
  local max_events, timeout = tonumber(m.max_events), tonumber(m.timeout)
  while total < GATHER_EVENTS do  -- each batch holds one event or more
    local id = redis.call('LINDEX', list, #ids + 1)
    if not id then break end
    local batch = redis.call('LRANGE', d.base .. 'batch:' .. id, 0, -1)
    local count = #batch - BATCH_HEADER
    if count < 1 or total + count > GATHER_EVENTS then break end
    local open = id == redis.call('GET', d.q .. 'current:' .. lane)
    if open and count < max_events and tonumber(batch[BATCH_CREATED + 1]) + timeout > d.now then
      break
    end
    for i = BATCH_HEADER + 1, #batch do
      if entry_expired(batch[i], d.now) then return ids, found end
    end
    if open then redis.call('DEL', d.q .. 'current:' .. lane) end
    redis.call('HSETNX', d.base .. 'first_attempt', id, d.now)
    ids[#ids + 1] = id
    found[#found + 1] = {id, tonumber(batch[BATCH_CREATED + 1]),
      tonumber(batch[BATCH_ATTEMPTS + 1]), {unpack(batch, BATCH_HEADER + 1)}}
    total = total + count
  end
  return ids, found
end

-- Start the subscriber's next delivery: the next due batch by (lane, age), its expired
-- events dropped, marked in flight with `nonce`; or the job settled when the subscriber
-- is in backoff, has nothing due, or is gone. `salt`: the signing secret's salt for a
-- subscriber from before secrets existed. Returns {'deliver', lane, id, created_at,
-- attempts, callback, uuid, client name (for logs, never the token), {entry...},
-- event_ids ('1' or ''), {salt of each secret that signs now}, failing ('1' when the
-- last attempt failed: the engine bounds such attempts' share), the id of the lake
-- replay that queued the batch or '', the subscriber's own headers (JSON, secrets
-- sealed: app/services/sealed_headers.py) or '', how its callback authenticates the
-- bus (JSON: app/models/callback_auth.py) or '', its TLS client certificate (JSON,
-- the key sealed: app/models/client_cert.py) or '', the routes' transforms and their
-- version, its destination (a broker in place of the callback, JSON, secrets sealed:
-- app/models/destination.py) or '', the batches gathered into the flight after this one
-- (gather: {id, created_at, attempts, {entry...}} each, none for a callback)}, {'wait', due},
-- {'idle'}, {'gone'} or {'lost'}.
local function begin_delivery(d, nonce, salt)
  if not job_held(d.k[8], d.job) then return {'lost'} end
  local m = hash_fields(d.k[1], {'max_events', 'timeout', 'next_attempt_at', 'callback',
    'uuid', 'event_ids', 'secret_salt', 'previous_salt', 'previous_until', 'streak',
    'paused_at', 'draining', 'concurrency', 'circuit_at', 'probe_ms', 'headers', 'auth',
    'client_cert', 'transforms', 'transform_version', 'destination'})
  if not m.max_events then
    settle(d, nil)
    return {'gone'}
  end
  -- paused: nothing is sent, and nothing is due until it resumes; while a change of
  -- concurrency drains, the new layout's partitions wait (lib/partitions.lua's drain_check)
  local drain_waits = m.draining and redis.call('SISMEMBER', d.base .. 'draining', d.s.pid) == 0
  if m.paused_at or drain_waits then
    if d.part then place_leave(d) end
    settle(d, nil)
    return {'idle'}
  end
  -- the subscriber's, while its circuit is open
  local probe_at = tonumber(m.next_attempt_at or '0')
  if d.part then  -- a partition's own backoff and failures in a row
    local own = redis.call('HMGET', d.f, 'next_attempt_at', 'streak', 'inflight')
    m.next_attempt_at, m.streak = own[1], own[2]
    if own[3] then  -- a flight that never settled (its worker taken for dead): replaced
      redis.call('HDEL', d.f, 'inflight', 'nonce', 'more')
      redis.call('HINCRBY', d.k[1], 'flying', -1)
    end
  end
  local max_events, timeout = tonumber(m.max_events), tonumber(m.timeout)
  local not_before = tonumber(m.next_attempt_at or '0')
  -- an open circuit is probed by one partition at a time: the others wait for the
  -- subscriber's next probe (the one that begins claims it, below)
  if d.part and m.circuit_at and probe_at > not_before then not_before = probe_at end
  if not_before > d.now then
    if d.part then place_leave(d) end
    return {'wait', settle_from_queue(d, not_before)}
  end
  local base, q, lane = d.base, d.q, 0
  while lane <= LAST_LANE do
    local id = redis.call('LINDEX', q .. 'lane:' .. lane, 0)
    local key = id and base .. 'batch:' .. id
    local ready = false
    if id then
      if id ~= redis.call('GET', q .. 'current:' .. lane) then
        ready = true
      elseif redis.call('LLEN', key) - BATCH_HEADER >= max_events
          or tonumber(redis.call('LINDEX', key, BATCH_CREATED)) + timeout <= d.now then
        redis.call('DEL', q .. 'current:' .. lane)
        ready = true
      end
    end
    if ready then
      local batch = redis.call('LRANGE', key, 0, -1)
      local live, expired = {}, 0
      for i = BATCH_HEADER + 1, #batch do
        if entry_expired(batch[i], d.now) then
          expired = expired + 1
        else
          live[#live + 1] = batch[i]
        end
      end
      if expired > 0 then
        count_dropped(d.s, 'expired', expired)
        redis.call('HINCRBY', d.k[2], d.token, -expired)
      end
      if #live == 0 then
        -- nothing left to send: no HTTP call; look again
        batch_remove(d.s, lane, id, 0)
      else
        if expired > 0 then batch_rewrite(d.s, id, batch, live) end
        -- a partition takes a place in flight, or waits in line for one
        if d.part and not place_take(d, tonumber(m.concurrency or '1')) then
          settle(d, nil)
          return {'idle'}
        end
        local more, gathered = gather(d, m, lane, #live)
        redis.call('HSET', d.f, 'inflight', id, 'nonce', nonce, 'last_attempted_at', d.now)
        if #more > 0 then
          redis.call('HSET', d.f, 'more', table.concat(more, ' '))
        else
          redis.call('HDEL', d.f, 'more')
        end
        if d.part then redis.call('HSET', d.k[1], 'last_attempted_at', d.now) end
        if d.part and m.circuit_at then  -- this is the probe: the next is one interval away
          redis.call('HSET', d.k[1], 'next_attempt_at', d.now + tonumber(m.probe_ms or '30000'))
        end
        redis.call('HSETNX', base .. 'first_attempt', id, d.now)
        if not m.secret_salt then
          m.secret_salt = salt
          redis.call('HSET', d.k[1], 'secret_salt', m.secret_salt)
        end
        local salts = {m.secret_salt}
        if m.previous_salt and tonumber(m.previous_until or '0') > d.now then
          salts[2] = m.previous_salt
        end
        -- read by name in app/delivery/tags.py's Delivering
        return {'deliver', lane, id, tonumber(batch[2]), tonumber(batch[3]), m.callback, m.uuid,
          redis.call('HGET', d.k[1], 'name') or '(deleted client)', live,
          m.event_ids == '1' and '1' or '', salts, m.streak and '1' or '',
          redis.call('HGET', base .. 'replayed', id) or '', m.headers or '', m.auth or '',
          m.client_cert or '', m.transforms or '', m.transform_version or '0',
          m.destination or '', gathered}
      end
    else
      lane = lane + 1
    end
  end
  local due = settle(d, next_due(d, max_events, timeout))
  if d.part then place_leave(d) end  -- no place taken: pass it on
  if due == -1 then return {'idle'} end
  return {'wait', due}
end

-- A sweep of the instant lists keys[from], keys[from + 3], ... (with this worker's pending
-- list and the pending index after each, as take_keys lists them): the first job found
-- moves to this worker's pending list there, and its subscriber's next due batch begins
-- under `nonce`. bases[i] is the key base of the i-th shard swept. Returns nil when every
-- list was empty, else {i, job, <what begin_delivery returns>, left}; a job that is not a
-- delivery (none are, on queue main) comes back with {'run'}. `left`: the jobs still
-- waiting in the lists swept, so the worker wakes that many more of its idle slots at
-- once (a fan-out to thousands is taken up in a few round trips, not one slot a trip).
local function sweep_and_begin(keys, from, bases, worker, now, nonce, salt)
  for i = from, #keys, 3 do
    local job = job_take(keys[i], keys[i + 1], keys[i + 2], worker)
    if job then
      local place = (i - from) / 3 + 1
      local left = 0
      for j = i, #keys, 3 do left = left + redis.call('LLEN', keys[j]) end
      local ok, decoded = pcall(cmsgpack.unpack, job)
      if not ok or type(decoded) ~= 'table' or decoded[1] ~= 'batch' then
        return {place, job, {'run'}, left}  -- the worker runs (or drops) it as any other job
      end
      local d = delivery_ctx(bases[place], decoded[2][1], now, job, nil, keys[i + 1])
      return {place, job, begin_delivery(d, nonce, salt), left}
    end
  end
  return nil
end

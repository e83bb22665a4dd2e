-- The callback failed (status, timeout, connection error): damage health (Routemaster's
-- visible figure), back off, settle the job. The delay comes from the failures in a row
-- (`streak`): a lone failure (the first after a success) waits the lone delay, so an
-- endpoint that fails now and then keeps up; from the second in a row, the first delay x
-- 2^(streak - 2) (with a lone delay of 0: the first delay x 2^(streak - 1) from the first
-- failure); either at most the longest delay, times the jitter. The circuit opens on an
-- outage, not a count: the failure that makes the streak the circuit's count opens it
-- only once the streak spans the outage time (`streak_at`, its first failure, that long
-- ago with no 2xx since); at `concurrency` n the partitions' failures come n at a time,
-- and a blip of 100 ms made ten of them (`circuit_at`); after that the head batch is tried once per probe interval x jitter. Attempts count toward
-- max_attempts only while the circuit is closed (a probe never dead-letters); after
-- max_attempts the batch's events move to the dead letters. deliver_ack closes the circuit.
-- Fenced like deliver_ack: only the delivery in flight may fail it.
-- A failing key steps aside: at `concurrency` > 1, a batch's second failure in a row while
-- the endpoint answers the subscriber's other keys (a 2xx since the batch was first
-- tried, or no other partition failing; its failures in a row below the circuit's
-- count, the circuit closed) moves the batch, with every later event of its keys, to the layout's aside
-- partition (lib/partitions.lua), which retries it after the delay; the partition it
-- came from goes on at once with its other keys (`set_aside`, below).
-- Or the callback asked to wait (429 or 503 with Retry-After), or the engine held the
-- attempt back unsent (no outcome, ARGV[27]: its failing share was full, or the callback's
-- origin had no connection free in time): no attempt
-- counted, no health lost, the streak unchanged; the batch stays at the head of its lane.
-- An operational event (lib/operations.lua) tells when the circuit opens and when events
-- are dead-lettered.
-- USES batches jobs delivery operations acks shaping
-- KEYS[1..11] as lib/delivery.lua lists them: subscriber, the shard's event gauge, batch gauge
-- and counters, KEYS[5..7] its jobs index, scheduled, instant of queue main, KEYS[8] the
-- worker's pending list, KEYS[9] dead letters, KEYS[10] the shard's delivery log,
-- KEYS[11] the shard's attempt stream
-- ARGV[1] the shard's key base, ARGV[2] the partition's pid (the subscriber's token at
--   concurrency 1; lib/partitions.lua), ARGV[3] now (ms), ARGV[4] the job
-- ARGV[5] batch id, ARGV[6] nonce given to begin
-- ARGV[7] health points added (BUSBAR_HP_DAMAGE_RATE, negative)
-- ARGV[8] the jitter factor, 1..1.5
-- ARGV[9] what the callback answered, as the attempt log shows it: a status code (with the
--         wait a 429/503 asked for), an error name, or why it was held back
-- ARGV[10] most dead letters kept
-- ARGV[11] the wait a 429/503 asked for, ms, or '' for a failure
-- ARGV[12] the delay after the second failure in a row (after a first failure too, when
--          the lone delay is 0), ms (BUSBAR_RETRY_FIRST_MS)
-- ARGV[13] the longest delay while closed, ms (BUSBAR_MAX_BACKOFF_MS)
-- ARGV[14] failures in a row that open the circuit (BUSBAR_CIRCUIT_FAILURES)
-- ARGV[15] the probe interval while open, ms (BUSBAR_CIRCUIT_PROBE_MS)
-- ARGV[16] attempts kept in the subscriber's attempt log (BUSBAR_ATTEMPT_LOG), 0 = none
-- ARGV[17] the oldest attempt kept there, ms (now less BUSBAR_ATTEMPT_LOG_AGE_S)
-- ARGV[18] the first bytes of the answer's body ('' for none)
-- ARGV[19] the worker (`<process>/<slot>`), for the attempt log
-- ARGV[20] the time the attempt took, ms
-- ARGV[21] the shard attempt stream's approximate MAXLEN (BUSBAR_ATTEMPT_STREAM_MAXLEN), 0 = off
-- ARGV[22] the delay after a lone failure, ms (BUSBAR_RETRY_LONE_MS; 0: none of its own)
-- ARGV[23] how recent a 2xx shows the endpoint alive, ms (BUSBAR_RETRY_ALIVE_MS; 0: never):
--          then failures in a row back off from the lone delay, doubling
-- ARGV[24] how long failures in a row must span to open the circuit, ms
--          (BUSBAR_CIRCUIT_OUTAGE_MS)
-- ARGV[25] the version of the subscription's transforms the attempt ran, or ''
-- ARGV[26] what the routes' transforms made of the batch, as deliver_ack's ARGV[19], or
--          '': the events they dropped or failed leave the batch in this step
--          (lib/shaping.lua), and what is left is what was sent and failed
-- ARGV[27] the attempt's outcome class, as the attempt log's filter names it
--          (app/models/attempt_result.py), or '' when the engine held it back unsent
-- ARGV[28] how many of a broker flight's batches (lib/delivery.lua's gather) the broker
--          confirmed before the one that failed: those are acknowledged as deliver_ack
--          would (their attempts `confirmed`), and the failure is the next one's; 0 for
--          a callback, or when the first failed
-- ARGV[29] approximate MAXLEN of the delivery log, 0 when it is off (with ARGV[28])
-- ARGV[30] health points gained (BUSBAR_HP_HEAL_RATE; with ARGV[28])
-- ARGV[31] the confirmed batches' attempts' status (app/models/attempt_result.py's
--          CONFIRMED; with ARGV[28])
-- ARGV[32] and their outcome class (with ARGV[28])
-- Returns {'done', next due, circuit}: circuit 'opened' when this failure opened it,
-- 'open' when it was a probe, '' when closed; or what lib/delivery.lua's fence answers.

-- Failures in a row of one batch after which its keys step aside: a lone failure (a flaky
-- endpoint's) is retried in place after the lone delay, as at concurrency 1.
local ASIDE_AFTER = 2

-- Batch `id` of lane `lane` failed in partition `s` of a layout of n: it moves to the end
-- of the aside partition's lane (whose open batch is closed, so what follows queues
-- behind it), its entries are counted in the aside hash `keys`, and every later event of those keys in `s`
-- follows it there in order; the aside partition is due after `not_before`. The moved
-- events lose their coalescing entries (what merged stays merged). Returns false, doing
-- nothing, when the layout has no aside job (made before aside partitions: posting the
-- subscription again gives it one).
local function set_aside(s, id, lane, n, not_before, now, max_events)
  local a = sub_ctx(s.shard, partition_pid(s.token, n, n))
  local job = redis.call('HGET', a.flight, 'job')
  if not job then return false end
  local key = s.base .. 'batch:' .. id
  local entries = redis.call('LRANGE', key, BATCH_HEADER, -1)
  local aside = {}
  for _, entry in ipairs(entries) do aside[entry_key(entry)] = true end
  aside_count(a, entries, 1)
  if redis.call('EXISTS', s.q .. 'coalesce') == 1 then coalesce_forget(s, id, entries) end
  redis.call('LREM', s.q .. 'lane:' .. lane, 1, id)
  redis.call('DEL', a.q .. 'current:' .. lane)
  redis.call('RPUSH', a.q .. 'lane:' .. lane, id)
  local index = s.shard .. 'batches:index:' .. lane
  local score = redis.call('ZSCORE', index, index_member(s.pid, id)) or now
  redis.call('ZREM', index, index_member(s.pid, id))
  redis.call('ZADD', index, score, index_member(a.pid, id))
  local batches = 0
  for l = 0, LAST_LANE do
    for _, other in ipairs(redis.call('LRANGE', s.q .. 'lane:' .. l, 0, -1)) do
      local batch = redis.call('LRANGE', s.base .. 'batch:' .. other, 0, -1)
      local kept, moved = {}, {}
      for i = BATCH_HEADER + 1, #batch do
        if aside[entry_key(batch[i])] then
          moved[#moved + 1] = batch[i]
        else
          kept[#kept + 1] = batch[i]
        end
      end
      if #moved > 0 then
        for _, entry in ipairs(moved) do
          local _, _, new = batch_append(a, l, entry, tonumber(batch[BATCH_CREATED + 1]), max_events)
          coalesce_unmap(a, entry)
          if new then batches = batches + 1 end
        end
        aside_count(a, moved, 1)
        if #kept == 0 then
          batch_remove(s, l, other, 0)  -- its events moved, not dropped
        else
          batch_rewrite(s, other, batch, kept)
        end
      end
    end
  end
  if batches > 0 then redis.call('HINCRBY', s.batches, s.token, batches) end
  local at = math.max(not_before, tonumber(redis.call('HGET', a.flight, 'next_attempt_at') or '0'))
  redis.call('HSET', a.flight, 'next_attempt_at', at)
  job_due_by(KEYS[5], KEYS[6], KEYS[7], job, at, now)
  return true
end

local d = delivery_ctx(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], KEYS)
local s, now, id = d.s, d.now, ARGV[5]
local refused = fence(d, id, ARGV[6])
if refused then return refused end
-- a broker flight of several batches (lib/delivery.lua's gather) whose first `confirmed`
-- the broker took: those are acknowledged, the endpoint healed, and the next one fails
-- here; the batches after it go back untried, as they were queued
local confirmed = math.min(tonumber(ARGV[28]), #d.more)
if confirmed > 0 and ARGV[27] ~= '' then
  local a = {took = ARGV[20], status = ARGV[31], outcome = ARGV[32], body = '',
    worker = ARGV[19], log = attempt_bounds(ARGV[16], ARGV[17], ARGV[21]),
    maxlen = tonumber(ARGV[29]), time = false}
  ack_batch(d, id, a, nil)
  ack_gathered(d, a, confirmed - 1)
  ack_heal(d, tonumber(ARGV[30]),
    redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'paused_at', 'circuit_at'))
  id = d.more[confirmed]
end
if ARGV[26] ~= '' then shape_batch(d, KEYS, id, cmsgpack.unpack(ARGV[26]), now) end
local key = d.base .. 'batch:' .. id
local lane = tonumber(redis.call('LINDEX', key, BATCH_LANE))
local count = redis.call('LLEN', key) - BATCH_HEADER
local attempts = tonumber(redis.call('LINDEX', key, BATCH_ATTEMPTS)) + 1
local held_back = ARGV[27] == ''
if not held_back then  -- held back: never sent, so no attempt
  record_attempt(d, attempt_bounds(ARGV[16], ARGV[17], ARGV[21]), {batch = id, events = count,
    lane = lane, attempt = attempts, worker = ARGV[19], took = ARGV[20], status = ARGV[9],
    outcome = ARGV[27], wait = ARGV[11], body = ARGV[18], transform = ARGV[25]})
end
local wait = tonumber(ARGV[11])
if wait then
  local until_ms = now + wait
  redis.call('HSET', d.f, 'next_attempt_at', until_ms)
  -- a subscriber's own ask, or the engine's failing share or the origin full (held back)
  local counter = held_back and 'delivery.held_back' or 'delivery.deferred'
  redis.call('HINCRBY', KEYS[4], counter, 1)
  return {'done', settle_from_queue(d, until_ms)}
end
-- The wait before the next attempt while the circuit is closed (docs/delivery.md,
-- Failure policy), after `own` failures in a row: from the lone delay while the endpoint
-- answered 2xx lately (`ok_at`: flaky, not down), else from the first delay after a lone
-- failure, doubling with each failure in a row; at most the longest delay; times the
-- jitter. The one place a retry's delay is decided.
local function failure_delay(own, ok_at, jitter)
  local lone, doublings = tonumber(ARGV[22]), own - 1
  local first = tonumber(ARGV[12])
  local alive = tonumber(ARGV[23])
  if lone > 0 and alive > 0 and ok_at and now - tonumber(ok_at) < alive then
    first = lone
  elseif lone > 0 then
    doublings = own - 2
  end
  if doublings < 0 then
    return math.min(tonumber(ARGV[13]), lone) * jitter
  end
  return math.min(tonumber(ARGV[13]), first * math.pow(2, doublings)) * jitter
end

local jitter = tonumber(ARGV[8])
local state = redis.call('HMGET', KEYS[1], 'streak', 'circuit_at', 'max_attempts', 'ok_at',
  'streak_at')
-- the circuit counts the subscriber's failures in a row (any partition's: an ack anywhere
-- ends them, so one failing key never opens it); the backoff, the partition's own
-- an aside partition's failures are its keys' own (the endpoint answered others since
-- they stepped aside): they back off there and are not the subscriber's
local pn, pp = string.match(d.s.pid, '#(%d+)%.(%d+)$')
local in_aside = pn ~= nil and pn == pp
local streak = tonumber(state[1] or '0')
if not in_aside then streak = streak + 1 end
-- when the failures in a row began (a streak from before this field: long ago)
local streak_at = tonumber(state[5] or '0')
if streak == 1 and not in_aside then
  streak_at = now
  redis.call('HSET', KEYS[1], 'streak_at', now)
end
local own = streak
if d.part then own = tonumber(redis.call('HGET', d.f, 'streak') or '0') + 1 end
local circuit, delay = '', 0
if state[2] then
  circuit, delay = 'open', tonumber(ARGV[15]) * jitter
elseif not in_aside and streak >= tonumber(ARGV[14]) and now - streak_at >= tonumber(ARGV[24]) then
  circuit, delay = 'opened', tonumber(ARGV[15]) * jitter
  redis.call('HSET', KEYS[1], 'circuit_at', now, 'probe_ms', ARGV[15])
  redis.call('HINCRBY', KEYS[4], 'circuit.opened', 1)
  note_operation(s.shard, KEYS[1], 'subscriber.circuit_opened',
    {failures = streak, last_status = ARGV[9], probe_ms = tonumber(ARGV[15]),
     failing_ms = now - streak_at})
else
  delay = failure_delay(own, state[4], jitter)
end
local not_before = now + math.floor(delay)
local max_attempts = tonumber(state[3] or '0')
-- steps aside: a partition of the current layout (not the aside one), the endpoint alive
-- for the subscriber's other keys, the batch not due for the dead letters
-- (the endpoint answered 2xx since this batch was first tried, or no other partition
-- failed meanwhile: its key, not an outage; in an outage the partitions fail together,
-- and they back off as a whole); read only for a partition: at concurrency 1 nothing
-- steps aside
local layout, answered = 1, false
if d.part then
  layout = tonumber(redis.call('HGET', KEYS[1], 'partitions') or '1')
  local first_try = tonumber(redis.call('HGET', d.base .. 'first_attempt', id) or now)
  answered = (state[4] and tonumber(state[4]) > first_try) or streak == own
end
local aside = d.part and circuit == '' and answered and streak < tonumber(ARGV[14])
  and attempts >= ASIDE_AFTER and not (max_attempts > 0 and attempts >= max_attempts)
  and tonumber(pn) == layout and tonumber(pp) < layout
redis.call('HSET', KEYS[1], 'health_points', health(d, tonumber(ARGV[7])))
if not in_aside then redis.call('HSET', KEYS[1], 'streak', streak) end
if not aside then redis.call('HSET', d.f, 'next_attempt_at', not_before, 'streak', own) end
-- a partition's circuit probe shows on the subscriber (GET /subscriptions' next_probe_at)
if circuit ~= '' and d.part then redis.call('HSET', KEYS[1], 'next_attempt_at', not_before) end
redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('HINCRBY', KEYS[4], 'delivery.failures', 1)
if circuit == 'open' then
  redis.call('HINCRBY', KEYS[4], 'circuit.probes', 1)  -- not an attempt: nothing counted
elseif max_attempts > 0 and attempts >= max_attempts then
  local letters = redis.call('LRANGE', key, BATCH_HEADER, -1)
  local head = string.format('%d|%d|%d|', attempts, now, lane) .. ARGV[9] .. '|'
  for i = 1, #letters do letters[i] = head .. letters[i] end
  dead_letters_push(KEYS, letters, tonumber(ARGV[10]))
  note_operation(s.shard, KEYS[1], 'subscriber.dead_lettered',
    {events = count, batch = tonumber(id), attempts = attempts, last_status = ARGV[9]})
  batch_remove(s, lane, id, count)
  -- a dead batch frees the lane: the next one goes out after the backoff, its own
  -- failures counted afresh in a partition (an aside partition holds one failing key's
  -- batches only, with no other key's success to end its failures in a row)
  if d.part then redis.call('HDEL', d.f, 'streak') end
else
  redis.call('LSET', key, BATCH_ATTEMPTS, attempts)
  local meta = redis.call('HMGET', KEYS[1], 'max_events')
  if aside and set_aside(s, id, lane, layout, not_before, now, tonumber(meta[1])) then
    redis.call('HINCRBY', KEYS[4], 'delivery.set_aside', 1)
    redis.call('HSET', d.f, 'next_attempt_at', 0)  -- its failures were the key's: gone
    redis.call('HDEL', d.f, 'streak')
    return {'done', settle_from_queue(d, nil), circuit}
  end
  -- no aside job (a layout from before them): the partition backs off as a whole
  if aside then redis.call('HSET', d.f, 'next_attempt_at', not_before, 'streak', own) end
end
return {'done', settle_from_queue(d, not_before), circuit}

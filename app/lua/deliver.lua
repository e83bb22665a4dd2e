-- One subscriber's delivery state machine, run by its delivery job. Every step ends by
-- settling the job in the same script (back to scheduled at the next due time, or gone
-- when nothing is queued), so a batch is never left without a job and a job never runs
-- for nothing: ingest and acknowledgement cannot race.
--   begin: pick the next due batch by (lane, age), drop its expired events, mark it in
--          flight and return it; or settle the job when the subscriber is in backoff,
--          has nothing due, or is gone.
--   ack:   the callback answered 2xx: delete the batch, count, heal, settle the job.
--   fail:  anything else: count the attempt, damage health, back off; after
--          max_attempts move the batch's events to the dead letters; settle the job.
-- USES batches
-- KEYS[1] the subscriber hash
-- KEYS[2] event gauge hash
-- KEYS[3] batch gauge hash
-- KEYS[4] counters hash
-- KEYS[5] jobs index set of queue main
-- KEYS[6] jobs scheduled sorted set of queue main
-- KEYS[7] jobs instant list of queue main
-- KEYS[8] the worker's pending list
-- KEYS[9] the subscriber's dead letters list
-- KEYS[10] the subscriber's delivery log partition (stream)
-- KEYS[11] tokens hash (the log names the subscriber by client name, never by token)
-- ARGV[1] op: begin | ack | fail
-- ARGV[2] key prefix
-- ARGV[3] token
-- ARGV[4] now, ms
-- ARGV[5] the subscriber's job
-- ARGV[6] batch id (ack, fail)
-- ARGV[7] health points gained (ack, BUSBAR_HP_HEAL_RATE) or lost (fail, HP_DAMAGE_RATE)
-- ARGV[8] backoff at 0 health points, ms, already jittered (fail); HTTP time, ms (ack)
-- ARGV[9] what the callback answered: a status code or an error name (fail);
--         approximate MAXLEN of the delivery log, 0 when it is off (ack)
-- ARGV[10] most dead letters kept (fail)
-- Returns {'deliver', lane, id, created_at, attempts, callback, uuid, {entry...}},
-- {'wait', due}, {'idle'}, {'gone'} (begin); {'done', next due or -1} (ack, fail).
local op, prefix, token, now, job = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local base = prefix .. '{sub:' .. token .. '}:'
local LANES = 10

-- The earliest time something queued is due, or nil when nothing is queued.
local function next_due(max_events, timeout)
  local due = nil
  for lane = 0, LANES do
    local id = redis.call('LINDEX', base .. 'lane:' .. lane, 0)
    if id then
      if id ~= redis.call('GET', base .. 'current:' .. lane) then return now end
      local key = base .. 'batch:' .. id
      if redis.call('LLEN', key) - 3 >= max_events then return now end
      local at = tonumber(redis.call('LINDEX', key, 1)) + timeout
      if not due or at < due then due = at end
    end
  end
  return due
end

-- Release the job from the worker and put it where it belongs now.
local function settle(due)
  redis.call('LREM', KEYS[8], 0, job)
  if not due then
    redis.call('SREM', KEYS[5], job)
    return -1
  end
  redis.call('SADD', KEYS[5], job)
  if due <= now then
    redis.call('ZREM', KEYS[6], job)
    redis.call('LPUSH', KEYS[7], job)
  else
    redis.call('ZADD', KEYS[6], due, job)
  end
  return due
end

local function settle_from_queue(not_before)
  local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout')
  if not meta[1] then return settle(nil) end
  local due = next_due(tonumber(meta[1]), tonumber(meta[2]))
  if due and not_before and due < not_before then due = not_before end
  return settle(due)
end

local function remove_batch(lane, id, count)
  batch_remove(prefix, token, lane, id, count, KEYS[2], KEYS[3])
end

if op == 'begin' then
  local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'next_attempt_at',
    'callback', 'uuid')
  if not meta[1] then
    settle(nil)
    return {'gone'}
  end
  local max_events, timeout = tonumber(meta[1]), tonumber(meta[2])
  local not_before = tonumber(meta[3] or '0')
  if not_before > now then
    return {'wait', settle_from_queue(not_before)}
  end
  local lane = 0
  while lane <= LANES do
    local id = redis.call('LINDEX', base .. 'lane:' .. lane, 0)
    local key = id and base .. 'batch:' .. id
    local ready = false
    if id then
      if id ~= redis.call('GET', base .. 'current:' .. lane) then
        ready = true
      elseif redis.call('LLEN', key) - 3 >= max_events
          or tonumber(redis.call('LINDEX', key, 1)) + timeout <= now then
        redis.call('DEL', base .. 'current:' .. lane)
        ready = true
      end
    end
    if ready then
      local batch = redis.call('LRANGE', key, 0, -1)
      local live, expired = {}, 0
      for i = 4, #batch do
        if entry_expired(batch[i], now) then
          expired = expired + 1
        else
          live[#live + 1] = batch[i]
        end
      end
      if expired > 0 then
        count_dropped(KEYS[4], KEYS[1], 'expired', expired)
        redis.call('HINCRBY', KEYS[2], token, -expired)
      end
      if #live == 0 then
        remove_batch(lane, id, 0)  -- nothing left to send: no HTTP call; look again
      else
        if expired > 0 then batch_rewrite(base, id, batch, live) end
        redis.call('HSET', KEYS[1], 'inflight', id, 'last_attempted_at', now)
        redis.call('HSETNX', base .. 'first_attempt', id, now)
        return {'deliver', lane, id, tonumber(batch[2]), tonumber(batch[3]), meta[4], meta[5],
          live}
      end
    else
      lane = lane + 1
    end
  end
  local due = settle(next_due(max_events, timeout))
  if due == -1 then return {'idle'} end
  return {'wait', due}
end

-- ack and fail
local function health()
  local hp = tonumber(redis.call('HGET', KEYS[1], 'health_points') or '100') + tonumber(ARGV[7])
  return math.max(0, math.min(100, hp))
end

local id = ARGV[6]
local key = base .. 'batch:' .. id
redis.call('HDEL', KEYS[1], 'inflight')
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', key) == 0 then
  -- the subscriber (and so its batches) went away while the request was in flight
  return {'done', settle_from_queue(nil)}
end
local lane = tonumber(redis.call('LINDEX', key, 0))
local count = redis.call('LLEN', key) - 3
if op == 'ack' then
  local header = redis.call('LRANGE', key, 0, 2)
  local created = tonumber(header[2])
  redis.call('HINCRBY', KEYS[4], 'latency.batches_ms', math.max(0, now - created))
  local maxlen = tonumber(ARGV[9])
  if maxlen > 0 then
    -- logged in the step that deletes the batch: never logged without being
    -- acknowledged, never acknowledged without being logged
    redis.call('XADD', KEYS[10], 'MAXLEN', '~', maxlen, '*',
      'subscriber', redis.call('HGET', KEYS[11], token) or token,
      'priority', lane, 'batch_id', id, 'created_at', created,
      'first_attempt_at', redis.call('HGET', base .. 'first_attempt', id) or now,
      'delivered_at', now, 'attempts', tonumber(header[3]) + 1,
      'events', cmsgpack.pack(redis.call('LRANGE', key, 3, -1)))
  end
  remove_batch(lane, id, count)
  redis.call('HINCRBY', KEYS[4], 'delivery.batches', 1)
  redis.call('HINCRBY', KEYS[4], 'delivery.events', count)
  redis.call('HINCRBY', KEYS[4], 'delivery.time_ms', tonumber(ARGV[8]))
  redis.call('HINCRBY', KEYS[1], 'sent', count)
  redis.call('HSET', KEYS[1], 'health_points', health(), 'next_attempt_at', 0)
  return {'done', settle_from_queue(nil)}
end

-- fail
local attempts = tonumber(redis.call('LINDEX', key, 2)) + 1
local hp = health()
local delay = math.floor(tonumber(ARGV[8]) * math.pow(2, -hp / 10))
local not_before = now + delay
redis.call('HSET', KEYS[1], 'health_points', hp, 'next_attempt_at', not_before)
redis.call('HINCRBY', KEYS[4], 'delivery.failures', 1)
local max_attempts = tonumber(redis.call('HGET', KEYS[1], 'max_attempts') or '0')
if max_attempts > 0 and attempts >= max_attempts then
  local entries = redis.call('LRANGE', key, 3, -1)
  local head = string.format('%d|%d|%d|', attempts, now, lane) .. ARGV[9] .. '|'
  for i = 1, #entries do
    redis.call('RPUSH', KEYS[9], head .. entries[i])
  end
  local over = redis.call('LLEN', KEYS[9]) - tonumber(ARGV[10])
  if over > 0 then
    redis.call('LTRIM', KEYS[9], over, -1)
    redis.call('HINCRBY', KEYS[4], 'deadletters.trimmed', over)
  end
  redis.call('HINCRBY', KEYS[4], 'events.deadlettered', count)
  remove_batch(lane, id, count)
  -- a dead batch frees the lane: the next one goes out after the backoff
else
  redis.call('LSET', key, 2, attempts)
end
return {'done', settle_from_queue(not_before)}

-- Shared by the three delivery scripts (deliver_begin, deliver_ack, deliver_fail), which
-- take the same KEYS and the same first four ARGV:
--   KEYS[1] the subscriber hash           KEYS[2] the shard's event gauge hash
--   KEYS[3] the shard's batch gauge hash  KEYS[4] the shard's counters hash
--   KEYS[5..7] the shard's jobs index set, scheduled sorted set, instant list (main)
--   KEYS[8] the worker's pending list     KEYS[9] the subscriber's dead letters list
--   KEYS[10] the shard's delivery log stream
--   ARGV[1] the shard's key base, ARGV[2] token, ARGV[3] now (ms), ARGV[4] the job
-- Every step ends by settling the job in the same script (scheduled at the next due
-- time, instant, or gone when nothing is queued), so a batch is never left without a
-- job and a job never runs for nothing: ingest and acknowledgement cannot race.
local token, now, job = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local s = sub_ctx(ARGV[1], token)
local base = s.base
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

-- Release the held job and put it where it belongs now; returns the due time or -1.
local function settle(due)
  job_settle(KEYS[5], KEYS[6], KEYS[7], KEYS[8], job, due, now)
  return due or -1
end

-- Settle by what is queued, not before `not_before` (a backoff), if given.
local function settle_from_queue(not_before)
  local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout')
  if not meta[1] then return settle(nil) end
  local due = next_due(tonumber(meta[1]), tonumber(meta[2]))
  if due and not_before and due < not_before then due = not_before end
  return settle(due)
end

-- The first step of ack and fail: the answer must come from the delivery that is in
-- flight. Returns nil when it does, with the batch's key; otherwise the reply to give:
-- {'lost'} (this worker no longer holds the job: nothing changes), {'gone', -1} (the
-- subscriber was deleted meanwhile) or {'stale', due} (another delivery's answer, or a
-- batch id reused after data loss: no batch is touched, the held job is settled).
local function fence(id, nonce)
  if not job_held(KEYS[8], job) then return {'lost'} end
  local flight = redis.call('HMGET', KEYS[1], 'inflight', 'nonce', 'max_events')
  if not flight[3] then return {'gone', settle(nil)} end
  if flight[1] ~= id or flight[2] ~= nonce
      or redis.call('EXISTS', base .. 'batch:' .. id) == 0 then
    return {'stale', settle_from_queue(nil)}
  end
  redis.call('HDEL', KEYS[1], 'inflight', 'nonce')
  return nil
end

-- Health points after adding `delta`, within 0..100.
local function health(delta)
  local hp = tonumber(redis.call('HGET', KEYS[1], 'health_points') or '100') + delta
  return math.max(0, math.min(100, hp))
end

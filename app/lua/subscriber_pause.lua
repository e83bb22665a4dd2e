-- Pause or resume a subscriber's deliveries. Paused (`paused_at` in its hash): its
-- events keep queuing (ttls still apply) but nothing is sent; its job is taken out of
-- the queue when scheduled or instant, and a delivery in flight (the job pending)
-- finishes and settles with nothing due (lib/delivery.lua). Resumed: the job is due
-- again when something is, and delivery goes on in order. Pausing a paused subscriber
-- keeps when and by whom it was first paused.
-- Each change is told as an operational event (lib/operations.lua).
-- USES batches jobs delivery operations
-- KEYS[1] the subscriber hash
-- KEYS[2] the shard's jobs index set (main)
-- KEYS[3] the shard's jobs scheduled sorted set (main)
-- KEYS[4] the shard's jobs instant list (main)
-- ARGV[1] the shard's key base
-- ARGV[2] token (every partition of the subscriber pauses and resumes: lib/partitions.lua)
-- ARGV[3] now (ms)
-- ARGV[4] 'pause' or 'resume'
-- ARGV[5] who asks (a client's name, or root), kept as `paused_by`
-- ARGV[6] for a pause only if its circuit opened at or before this (ms; the automatic
--         pause of app/models/pausing.py), or '' to pause unconditionally
-- Returns {} when there is no such subscriber, else {paused_at, paused_by} as they are
-- now ({'', ''} once resumed).
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'job', 'paused_at')
if not meta[1] then return {} end
local now, job = tonumber(ARGV[3]), meta[3]
if ARGV[4] == 'pause' then
  local opened = tonumber(redis.call('HGET', KEYS[1], 'circuit_at') or '')
  if ARGV[6] ~= '' and (meta[4] or not opened or opened > tonumber(ARGV[6])) then
    return {'', ''}  -- not open for that long (any more), or paused already: nothing done
  end
  if not meta[4] then
    redis.call('HSET', KEYS[1], 'paused_at', now, 'paused_by', ARGV[5])
    for _, pid in ipairs(partitions_of(ARGV[1], ARGV[2])) do
      local f = sub_ctx(ARGV[1], pid).flight
      local pjob = f == KEYS[1] and job or redis.call('HGET', f, 'job')
      if pjob then job_cancel(KEYS[2], KEYS[3], KEYS[4], pjob) end
    end
    note_operation(ARGV[1], KEYS[1], 'subscriber.paused',
      {by = ARGV[5], automatic = ARGV[6] ~= ''})
  end
  return redis.call('HMGET', KEYS[1], 'paused_at', 'paused_by')
end
if meta[4] then
  local since = tonumber(redis.call('HGET', KEYS[1], 'paused_at'))
  redis.call('HDEL', KEYS[1], 'paused_at', 'paused_by')
  note_operation(ARGV[1], KEYS[1], 'subscriber.resumed',
    {by = ARGV[5], paused_ms = math.max(0, now - since)})
  -- every partition that may deliver (while a change of concurrency drains, the old
  -- layout's: lib/batches.lua) is due by what it holds
  local pids = partitions_of(ARGV[1], ARGV[2])
  if redis.call('HEXISTS', KEYS[1], 'draining') == 1 then
    pids = redis.call('SMEMBERS', sub_ctx(ARGV[1], ARGV[2]).base .. 'draining')
  end
  for _, pid in ipairs(pids) do
    local s = sub_ctx(ARGV[1], pid)
    local due = queue_due(s, now, tonumber(meta[1]), tonumber(meta[2]))
    local pjob = s.flight == KEYS[1] and job or redis.call('HGET', s.flight, 'job')
    if due and pjob then job_due_by(KEYS[2], KEYS[3], KEYS[4], pjob, due, now) end
  end
end
return {'', ''}

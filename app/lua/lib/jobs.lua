-- The job state machine (docs/internals.md, The job queue): every transition of a job lives
-- here, and every script that moves a job calls these functions, never the commands.
--
--   absent --push--> scheduled | instant      scheduled --promote--> instant
--   instant --take (BLMOVE, by the worker)--> pending (the worker's own list)
--   pending --settle--> absent (ack) | scheduled (nack, retry later) | instant
--   pending --scrub (holder dead, or the holder itself recovering)--> instant
--
-- A job is in exactly one state; the index set holds every job that is not absent, which
-- makes pushing an existing job a no-op (one delivery job per subscriber). Fencing: a
-- transition out of pending names the holder's pending list and changes nothing unless
-- the job is in it, so a worker that was taken for dead (paused, partitioned) and
-- scrubbed cannot, on waking up, put back a second copy of a job another worker holds.

-- Milliseconds by Redis's clock: liveness is judged on one clock, whatever the hosts say.
local function redis_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether the worker whose pending list this is holds the job.
local function job_held(pending, job)
  return redis.call('LPOS', pending, job) ~= false
end

-- The schedulers' bell (`<scheduled>:bell`, a list of one item at most), rung when a job
-- becomes the earliest scheduled: a scheduler sleeps until the earliest job it knows of,
-- blocked on the bell, and wakes when an earlier one comes (workers/scheduler.py).
local function job_ring(scheduled, job)
  local first = redis.call('ZRANGE', scheduled, 0, 0)
  local bell = scheduled .. ':bell'
  if first[1] == job and redis.call('LLEN', bell) == 0 then redis.call('RPUSH', bell, 1) end
end

-- Put a job (already in the index) where being due at `at` puts it.
local function job_place(scheduled, instant, job, at, now)
  if at <= now then
    redis.call('LPUSH', instant, job)
  else
    redis.call('ZADD', scheduled, at, job)
    job_ring(scheduled, job)
  end
end

-- absent -> instant (due now) or scheduled. A job that exists in any state is left alone;
-- returns whether it was pushed.
local function job_push(index, scheduled, instant, job, at, now)
  if redis.call('SADD', index, job) == 0 then return false end
  job_place(scheduled, instant, job, at, now)
  return true
end

-- Make a job due by `at`: pushed when absent, moved earlier when scheduled later, left
-- alone when instant or pending (its holder's settle looks at the queue again).
local function job_due_by(index, scheduled, instant, job, at, now)
  if job_push(index, scheduled, instant, job, at, now) then return end
  if at <= now then
    if redis.call('ZREM', scheduled, job) == 1 then redis.call('LPUSH', instant, job) end
  elseif redis.call('ZADD', scheduled, 'XX', 'LT', 'CH', at, job) == 1 then
    job_ring(scheduled, job)
  end
end

-- scheduled -> instant for jobs due by `now`, at most `limit` (bounds the script's run
-- time). Returns the number moved and the due time of the next scheduled job, or -1.
local function job_promote(scheduled, instant, now, limit)
  local due = redis.call('ZRANGEBYSCORE', scheduled, '-inf', now, 'LIMIT', 0, limit)
  for _, job in ipairs(due) do
    redis.call('ZREM', scheduled, job)
    redis.call('LPUSH', instant, job)
  end
  local next_job = redis.call('ZRANGE', scheduled, 0, 0, 'WITHSCORES')
  if next_job[2] then return #due, tonumber(next_job[2]) end
  return #due, -1
end

-- pending -> absent (due nil: acknowledged, nothing more to do), instant (due <= now) or
-- scheduled (due later: a nack, or the next batch's due time). Returns false, changing
-- nothing, when the worker does not hold the job.
local function job_settle(index, scheduled, instant, pending, job, due, now)
  if redis.call('LREM', pending, 0, job) == 0 then return false end
  if due then
    job_place(scheduled, instant, job, due, now)
  else
    redis.call('SREM', index, job)
  end
  return true
end

-- pending -> instant, taken next (right end), for every job of one holder (a worker
-- thread) of process `process`, when that process has been silent for more than
-- `silence` ms by Redis's clock (a missing heartbeat is silence), or unconditionally
-- when `silence` is 0 (the holder itself, recovering after an error). Returns the
-- number of jobs given back, or -1 when the process is alive.
local function job_scrub(pending, instant, workers, process, silence)
  if silence > 0 then
    local beat = tonumber(redis.call('HGET', workers, process) or '0')
    if redis_now_ms() - beat <= silence then return -1 end
  end
  local moved = 0
  while true do
    local job = redis.call('RPOP', pending)
    if not job then break end
    redis.call('RPUSH', instant, job)
    moved = moved + 1
  end
  return moved
end

-- scheduled | instant -> absent, for a job nobody holds (its subscriber was deleted). A
-- pending job is left to its holder, whose settle finds nothing left and drops it.
local function job_cancel(index, scheduled, instant, job)
  local removed = redis.call('ZREM', scheduled, job) + redis.call('LREM', instant, 0, job)
  if removed > 0 then redis.call('SREM', index, job) end
end

-- instant -> pending (a non-blocking take; BLMOVE is the blocking one, run by the
-- worker itself): the worker joins the pending index in the same step, so its list is
-- never unknown to ScrubQueues. Returns the job or nil.
local function job_take(instant, pending, index, worker)
  local job = redis.call('LMOVE', instant, pending, 'RIGHT', 'LEFT')
  if job then redis.call('SADD', index, worker) end
  return job
end

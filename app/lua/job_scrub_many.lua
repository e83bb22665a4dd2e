-- Give back the jobs of many holders of ONE process in one step: ScrubQueues and
-- ScrubWorkers on a dead process, and a worker's own delivery slots when it leaves. A
-- process has thousands of delivery slots, each with its own pending list; one script
-- per slot would make a scrub cost thousands of round trips, so holders come in
-- chunks (app/models/queue.py: SCRUB_CHUNK) and a live process costs one call.
-- A delivery job given back this way whose batch was in flight is recorded in its
-- subscriber's attempt log (and the shard's attempt stream) as `abandoned`
-- (lib/delivery.lua's record_abandoned).
-- USES batches jobs delivery
-- KEYS[1] jobs instant list
-- KEYS[2] jobs pending index set
-- KEYS[3] workers hash (process -> last heartbeat, ms by Redis TIME)
-- KEYS[3+i] the i-th holder's pending list
-- ARGV[1] the process all holders belong to
-- ARGV[2] silence, ms, after which the process counts as dead; 0 = unconditionally
-- ARGV[3] '1' to also remove the holders from the pending index (forgetting them)
-- ARGV[4] the shard's key base, for the attempts ('' for a queue of no deliveries)
-- ARGV[5] attempts kept per subscriber (BUSBAR_ATTEMPT_LOG), 0 = none
-- ARGV[6] the oldest attempt kept, ms
-- ARGV[7] the shard attempt stream's approximate MAXLEN (BUSBAR_ATTEMPT_STREAM_MAXLEN), 0 = off
-- ARGV[7+i] the i-th holder (`<process>/<slot>`)
-- Returns the number of jobs given back, or -1 when the process is alive (nothing done).
local silence = tonumber(ARGV[2])
local moved = 0
local base, log = ARGV[4], attempt_bounds(ARGV[5], ARGV[6], ARGV[7])
for i = 4, #KEYS do
  local holder = ARGV[i + 4]
  local held = base ~= '' and redis.call('LRANGE', KEYS[i], 0, -1) or {}
  local n = job_scrub(KEYS[i], KEYS[1], KEYS[3], ARGV[1], silence)
  if n < 0 then return -1 end
  moved = moved + n
  if #held > 0 then
    local now = redis_now_ms()
    for _, job in ipairs(held) do record_abandoned(base, job, log, holder, now) end
  end
  if ARGV[3] == '1' then redis.call('SREM', KEYS[2], holder) end
end
return moved

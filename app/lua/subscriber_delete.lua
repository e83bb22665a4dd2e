-- The shard step of deleting a subscriber (after subscriber_unroute has taken it out of
-- the catalog, so nothing new is routed to it): its settings, routes and everything
-- queued go in one step, counted as dropped; no delivery starts once this has run. The
-- work is O(lanes), whatever is queued: each non-empty lane list is renamed into the
-- shard's trash (a name nobody else uses, recorded in the trash set), whose batches
-- subscriber_purge deletes in bounded steps afterwards; so a new subscription of the
-- same client starts with empty lanes at once. A delivery job already held by a worker
-- (pending) is left alone: it finds no subscriber, finishes cleanly and is dropped.
-- USES batches jobs
-- KEYS[1] the subscriber hash
-- KEYS[2] the subscriber's routes hash
-- KEYS[3] the shard's event gauge hash
-- KEYS[4] the shard's batch gauge hash
-- KEYS[5] the shard's counters hash
-- KEYS[6] the shard's jobs index set of queue main
-- KEYS[7] the shard's jobs scheduled sorted set of queue main
-- KEYS[8] the shard's jobs instant list of queue main
-- KEYS[9] the shard's trash set (members `<token>/<n>/<lane>`, see app/models/keys.py)
-- ARGV[1] the shard's key base
-- ARGV[2] token (every partition of the subscriber goes: lib/partitions.lua)
-- ARGV[3] lowest lane number (the number of lanes - 1)
-- Returns {subscriber existed (0/1), events dropped, trash member...}.
local token = ARGV[2]
local s = sub_ctx(ARGV[1], token)
local base = s.base
local existed = redis.call('EXISTS', KEYS[1])
local pids = partitions_of(ARGV[1], token)
local jobs = {}
for _, pid in ipairs(pids) do
  local f = sub_ctx(ARGV[1], pid).flight
  jobs[#jobs + 1] = redis.call('HGET', f, 'job')
end
redis.call('DEL', KEYS[1], KEYS[2], base .. 'draining', base .. 'waiting')
-- these can be large; UNLINK frees them off the script's time
redis.call('UNLINK', base .. 'deadletters', base .. 'coalesce', base .. 'first_attempt',
  base .. 'replayed', base .. 'filled', base .. 'attempts', base .. 'oauth_token')

local reply = {existed, 0}
for _, pid in ipairs(pids) do
  local part = sub_ctx(ARGV[1], pid)
  local n = nil
  if part.q ~= base then
    redis.call('UNLINK', part.flight, part.q .. 'coalesce', part.q .. 'keys')
  end
  for lane = 0, tonumber(ARGV[3]) do
    local lane_key = part.q .. 'lane:' .. lane
    if redis.call('EXISTS', lane_key) == 1 then
      n = n or redis.call('INCR', base .. 'seq')  -- never reused: no two trashes collide
      local member = token .. '/' .. n .. '/' .. lane
      redis.call('RENAME', lane_key, base .. 'trash:' .. n .. ':' .. lane)
      redis.call('SADD', KEYS[9], member)
      reply[#reply + 1] = member
    end
    redis.call('DEL', part.q .. 'current:' .. lane)
  end
end
local dropped = tonumber(redis.call('HGET', KEYS[3], token) or '0')
redis.call('HDEL', KEYS[3], token)
redis.call('HDEL', KEYS[4], token)
if dropped > 0 then redis.call('HINCRBY', KEYS[5], 'events.removed', dropped) end

for _, job in ipairs(jobs) do
  if job then job_cancel(KEYS[6], KEYS[7], KEYS[8], job) end
end
reply[2] = dropped
return reply

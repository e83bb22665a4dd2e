-- Remove a subscriber, optionally with its API token, in one step: no event is queued
-- for it and no delivery starts once this has run, and its queued events are counted as
-- dropped. The work is O(lanes), whatever is queued: each non-empty lane list is renamed
-- into the trash (a name nobody else uses, recorded in the trash set), whose batches
-- subscriber_purge deletes in bounded steps afterwards; so a new subscription of the
-- same client starts with empty lanes at once. A delivery job already held by a worker
-- (pending) is left alone: it finds no subscriber, finishes cleanly and is dropped.
-- USES batches jobs
-- KEYS[1] tokens hash
-- KEYS[2] subscribers set
-- KEYS[3] the subscriber hash
-- KEYS[4] the subscriber's routes hash
-- KEYS[5] event gauge hash
-- KEYS[6] batch gauge hash
-- KEYS[7] counters hash
-- KEYS[8] jobs index set of queue main
-- KEYS[9] jobs scheduled sorted set of queue main
-- KEYS[10] jobs instant list of queue main
-- KEYS[11] trash set (members `<token>/<n>/<lane>`, see app/models/keys.py)
-- ARGV[1] key prefix
-- ARGV[2] token
-- ARGV[3] '1' to forget the token too
-- ARGV[4] lowest lane number (the number of lanes - 1)
-- Returns {subscriber existed (0/1), events dropped, trash member...}.
local prefix, token = ARGV[1], ARGV[2]
local base = prefix .. '{sub:' .. token .. '}:'
if ARGV[3] == '1' then redis.call('HDEL', KEYS[1], token) end
local existed = redis.call('SREM', KEYS[2], token)
local job = redis.call('HGET', KEYS[3], 'job')
for _, topic in ipairs(redis.call('HKEYS', KEYS[4])) do
  redis.call('HDEL', prefix .. 'topic:' .. topic .. ':subscribers', token)
end
redis.call('DEL', KEYS[3], KEYS[4])
-- these can be large; UNLINK frees them off the script's time
redis.call('UNLINK', base .. 'deadletters', base .. 'coalesce', base .. 'first_attempt')

local reply = {existed, 0}
local n = nil
for lane = 0, tonumber(ARGV[4]) do
  local lane_key = base .. 'lane:' .. lane
  if redis.call('EXISTS', lane_key) == 1 then
    n = n or redis.call('INCR', base .. 'seq')  -- never reused: no two trashes collide
    local member = token .. '/' .. n .. '/' .. lane
    redis.call('RENAME', lane_key, base .. 'trash:' .. n .. ':' .. lane)
    redis.call('SADD', KEYS[11], member)
    reply[#reply + 1] = member
  end
  redis.call('DEL', base .. 'current:' .. lane)
end
local dropped = tonumber(redis.call('HGET', KEYS[5], token) or '0')
redis.call('HDEL', KEYS[5], token)
redis.call('HDEL', KEYS[6], token)
if dropped > 0 then redis.call('HINCRBY', KEYS[7], 'events.removed', dropped) end

if job then job_cancel(KEYS[8], KEYS[9], KEYS[10], job) end
reply[2] = dropped
return reply

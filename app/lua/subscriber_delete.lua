-- Remove a subscriber and everything queued for it, optionally with its API token, in
-- one step: no delivery can start for a half-removed subscriber. Dropped events are
-- counted. A delivery job already held by a worker (pending) is left alone: it finds no
-- subscriber, finishes cleanly and is acknowledged.
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
-- ARGV[1] key prefix
-- ARGV[2] token
-- ARGV[3] '1' to forget the token too
-- ARGV[4] lowest lane number (the number of lanes - 1)
-- Returns {subscriber existed (0/1), events dropped}.
local prefix, token = ARGV[1], ARGV[2]
local base = prefix .. '{sub:' .. token .. '}:'
if ARGV[3] == '1' then redis.call('HDEL', KEYS[1], token) end
local existed = redis.call('SREM', KEYS[2], token)
local job = redis.call('HGET', KEYS[3], 'job')
for _, topic in ipairs(redis.call('HKEYS', KEYS[4])) do
  redis.call('HDEL', prefix .. 'topic:' .. topic .. ':subscribers', token)
end
redis.call('DEL', KEYS[3], KEYS[4], base .. 'deadletters', base .. 'coalesce',
  base .. 'first_attempt')

for lane = 0, tonumber(ARGV[4]) do
  local lane_key = base .. 'lane:' .. lane
  for _, id in ipairs(redis.call('LRANGE', lane_key, 0, -1)) do
    redis.call('ZREM', prefix .. 'batches:index:' .. lane, index_member(token, id))
    redis.call('DEL', base .. 'batch:' .. id)
  end
  redis.call('DEL', lane_key, base .. 'current:' .. lane)
end
local dropped = tonumber(redis.call('HGET', KEYS[5], token) or '0')
redis.call('HDEL', KEYS[5], token)
redis.call('HDEL', KEYS[6], token)
if dropped > 0 then redis.call('HINCRBY', KEYS[7], 'events.removed', dropped) end

if job then job_cancel(KEYS[8], KEYS[9], KEYS[10], job) end
return {existed, dropped}

-- Create or replace a client's subscription in one step: its settings, and its routes
-- on every topic it names (and none on the topics it no longer names). What is already
-- queued keeps the lane and expiry it was queued with.
-- KEYS[1] subscribers set
-- KEYS[2] topics set
-- KEYS[3] the subscriber hash
-- KEYS[4] the subscriber's routes hash (topic -> JSON route list)
-- ARGV[1] key prefix
-- ARGV[2] token
-- ARGV[3] callback
-- ARGV[4] uuid
-- ARGV[5] '1' when the client gave the uuid, '0' to keep a stored one
-- ARGV[6] timeout ms, ARGV[7] max_events, ARGV[8] max_attempts, ARGV[9] job, ARGV[10] now
-- ARGV[11..] topics, three values each: name, route table (msgpack), routes (JSON)
local prefix, token = ARGV[1], ARGV[2]
redis.call('SADD', KEYS[1], token)
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[3], 'uuid', ARGV[4])
else
  redis.call('HSETNX', KEYS[3], 'uuid', ARGV[4])
end
redis.call('HSET', KEYS[3], 'callback', ARGV[3], 'timeout', ARGV[6], 'max_events', ARGV[7],
  'max_attempts', ARGV[8], 'job', ARGV[9])
redis.call('HSETNX', KEYS[3], 'health_points', 100)
redis.call('HSETNX', KEYS[3], 'created_at', ARGV[10])
redis.call('HSETNX', KEYS[3], 'sent', 0)

local wanted = {}
for i = 11, #ARGV, 3 do wanted[ARGV[i]] = true end
for _, topic in ipairs(redis.call('HKEYS', KEYS[4])) do
  if not wanted[topic] then
    redis.call('HDEL', prefix .. 'topic:' .. topic .. ':subscribers', token)
  end
end
redis.call('DEL', KEYS[4])
for i = 11, #ARGV, 3 do
  local topic = ARGV[i]
  redis.call('SADD', KEYS[2], topic)
  redis.call('HSET', prefix .. 'topic:' .. topic .. ':subscribers', token, ARGV[i + 1])
  redis.call('HSET', KEYS[4], topic, ARGV[i + 2])
end
return 1

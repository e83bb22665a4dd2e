-- Delete a topic: every subscriber loses its routes on it (queued events stay queued),
-- and the topic's claim and counter go. Only its publisher or the root key may do it.
-- KEYS[1] topics set
-- KEYS[2] topic hash
-- KEYS[3] topic subscribers hash
-- ARGV[1] key prefix
-- ARGV[2] topic name
-- ARGV[3] caller token, or '' for the root key
-- Returns 1 deleted, 0 no such topic, -1 the caller is not the topic's publisher.
local prefix, topic, caller = ARGV[1], ARGV[2], ARGV[3]
if redis.call('SISMEMBER', KEYS[1], topic) == 0 then return 0 end
if caller ~= '' and redis.call('HGET', KEYS[2], 'publisher') ~= caller then return -1 end
for _, token in ipairs(redis.call('HKEYS', KEYS[3])) do
  redis.call('HDEL', prefix .. '{sub:' .. token .. '}:routes', topic)
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('SREM', KEYS[1], topic)
return 1

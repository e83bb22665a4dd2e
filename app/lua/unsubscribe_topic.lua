-- The catalog step of unsubscribing from one topic: nothing of it is routed to the
-- subscriber any more. The shard step (HDEL of its routes hash) follows; the subscriber
-- stays, possibly with no topic.
-- USES filters
-- KEYS[1] subscribers hash (token -> JSON list of its topics)
-- KEYS[2] the topic's subscribers hash
-- ARGV[1] token
-- ARGV[2] topic
-- ARGV[3] the catalog's key base (`P{c}:`), naming the topic's filters (lib/filters.lua)
-- Returns 1 when the topic was routed to the subscriber, 0 otherwise.
local before = redis.call('HGET', KEYS[1], ARGV[1])
if not before then return 0 end
local kept, found = {}, 0
for _, topic in ipairs(cjson.decode(before)) do
  if topic == ARGV[2] then found = 1 else kept[#kept + 1] = topic end
end
redis.call('HSET', KEYS[1], ARGV[1], #kept > 0 and cjson.encode(kept) or '[]')
set_filters(ARGV[3], ARGV[2], ARGV[1], '')
return redis.call('HDEL', KEYS[2], ARGV[1]) + found > 0 and 1 or 0

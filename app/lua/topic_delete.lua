-- The catalog step of deleting a topic, after the shard steps have taken it out of each
-- subscriber's routes: unroute it, forget its claim and counter. Only its publisher or
-- the root key may do it. Queued events stay queued. Its filters and its event schemas
-- (every version) go with it (the topic hash's `filters` version too: a publish that
-- names the old one is refused, and the next version drawn is new, lib/filters.lua).
-- KEYS[1] topics set
-- KEYS[2] topic hash
-- KEYS[3] topic subscribers hash
-- KEYS[4] subscribers hash (token -> JSON list of its topics)
-- ARGV[1] topic name
-- ARGV[2] caller token, or '' for the root key
-- Returns 1 deleted, 0 no such topic, -1 the caller is not the topic's publisher.
local topic, caller = ARGV[1], ARGV[2]
if redis.call('SISMEMBER', KEYS[1], topic) == 0 then return 0 end
if caller ~= '' and redis.call('HGET', KEYS[2], 'publisher') ~= caller then return -1 end
for _, token in ipairs(redis.call('HKEYS', KEYS[3])) do
  local before = redis.call('HGET', KEYS[4], token)
  if before then
    local kept = {}
    for _, t in ipairs(cjson.decode(before)) do
      if t ~= topic then kept[#kept + 1] = t end
    end
    redis.call('HSET', KEYS[4], token, #kept > 0 and cjson.encode(kept) or '[]')
  end
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[2] .. ':filters', KEYS[2] .. ':schemas')
redis.call('SREM', KEYS[1], topic)
return 1

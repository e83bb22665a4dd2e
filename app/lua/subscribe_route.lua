-- The catalog step of creating or replacing a subscription (after subscribe.lua): route
-- the topics it names to the subscriber, and unroute those it named before and no
-- longer does, from the catalog's own record of them, so a retry after any crash ends
-- with exactly the routes asked for.
-- USES filters
-- KEYS[1] subscribers hash (token -> JSON list of its topics)
-- KEYS[2] topics set
-- ARGV[1] the catalog's key base (`P{c}:`), naming the topics' subscriber hashes
-- ARGV[2] token
-- ARGV[3] the subscriber's shard
-- ARGV[4..] topics, three values each: name, route table (msgpack), the JSON list of the
--          filters its numbers name ('' when no route of it has one; lib/filters.lua)
-- Returns 1.
local base, token = ARGV[1], ARGV[2]
local wanted, names = {}, {}
for i = 4, #ARGV, 3 do
  wanted[ARGV[i]] = true
  names[#names + 1] = ARGV[i]
end
local before = redis.call('HGET', KEYS[1], token)
if before then
  for _, topic in ipairs(cjson.decode(before)) do
    if not wanted[topic] then
      redis.call('HDEL', base .. 'topic:' .. topic .. ':subscribers', token)
      set_filters(base, topic, token, '')
    end
  end
end
for i = 4, #ARGV, 3 do
  redis.call('SADD', KEYS[2], ARGV[i])
  set_filters(base, ARGV[i], token, ARGV[i + 2])
  redis.call('HSET', base .. 'topic:' .. ARGV[i] .. ':subscribers', token,
    ARGV[3] .. '|' .. ARGV[i + 1])
end
-- an empty Lua table encodes as {}, not []
redis.call('HSET', KEYS[1], token, #names > 0 and cjson.encode(names) or '[]')
return 1

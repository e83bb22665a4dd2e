-- The catalog step of deleting a subscriber, run before its shard step: nothing is
-- routed to it any more, it leaves the subscribers, and optionally its token goes (the
-- client can no longer authenticate). Idempotent: a retry after a crash between the two
-- steps finds nothing here and the shard step finishes the job.
-- USES filters
-- KEYS[1] tokens hash
-- KEYS[2] subscribers hash (token -> JSON list of its topics)
-- ARGV[1] the catalog's key base (`P{c}:`), naming the topics' subscriber hashes
-- ARGV[2] token
-- ARGV[3] '1' to forget the token too (and its operator mark, `P{c}:operators`)
-- Returns 1 when the subscriber was in the catalog, 0 otherwise.
local token = ARGV[2]
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[1], token)
  redis.call('SREM', ARGV[1] .. 'operators', token)
end
local topics = redis.call('HGET', KEYS[2], token)
if not topics then return 0 end
for _, topic in ipairs(cjson.decode(topics)) do
  redis.call('HDEL', ARGV[1] .. 'topic:' .. topic .. ':subscribers', token)
  set_filters(ARGV[1], topic, token, '')
end
redis.call('HDEL', KEYS[2], token)
return 1

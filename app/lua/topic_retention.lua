-- Set or clear a topic's payload retention (app/models/retention.py): only on a topic
-- that exists, by its publisher or root, in one step (a topic deleted meanwhile gets
-- no stray hash).
-- KEYS[1] the catalog's topics set
-- KEYS[2] the topic's hash
-- ARGV[1] the topic, ARGV[2] the caller's client key ('' for root)
-- ARGV[3] the retention in seconds, or '' to clear it (the bus's default applies)
-- Returns 1, -1 when there is no such topic, -2 when the caller does not publish it.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return -1 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[2], 'publisher') ~= ARGV[2] then return -2 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[2], 'retention_s')
else
  redis.call('HSET', KEYS[2], 'retention_s', ARGV[3])
end
return 1

-- Forget an API token and the subscriber that belongs to it, in one step, so a deleted
-- client can never keep receiving deliveries through a half-removed subscription.
-- KEYS[1] tokens hash
-- KEYS[2] subscribers set
-- KEYS[3] the token's subscriber hash
-- ARGV[1] the token
-- Returns 1 when the token existed, 0 otherwise.
local existed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
return existed

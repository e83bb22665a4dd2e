-- Read or rotate a subscriber's signing secret, stored as the salt it is derived from
-- (app/models/secrets.py). Reading makes one for a subscriber from before secrets
-- existed; rotating keeps the current one as `previous_salt` until now + grace (none
-- when grace is 0), dropping any older one. Nothing happens without a subscription.
-- KEYS[1] the subscriber hash
-- ARGV[1] 'get' or 'rotate', ARGV[2] a fresh salt, ARGV[3] now (ms), ARGV[4] grace (ms)
-- Returns {salt, previous_until (ms, 0 when no previous secret signs)}, or {} when
-- there is no such subscriber.
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local now, grace = tonumber(ARGV[3]), tonumber(ARGV[4])
local current = redis.call('HGET', KEYS[1], 'secret_salt')
if ARGV[1] == 'rotate' or not current then
  if current and ARGV[1] == 'rotate' and grace > 0 then
    redis.call('HSET', KEYS[1], 'previous_salt', current, 'previous_until', now + grace)
  else
    redis.call('HDEL', KEYS[1], 'previous_salt', 'previous_until')
  end
  current = ARGV[2]
  redis.call('HSET', KEYS[1], 'secret_salt', current)
end
local valid_until = tonumber(redis.call('HGET', KEYS[1], 'previous_until') or '0')
if valid_until <= now then valid_until = 0 end
return {current, valid_until}

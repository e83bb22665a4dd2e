-- The bus's key pairs that sign a JWT per push (app/models/push_keys.py). `current`
-- installs the caller's new key only when there is none (the first use, by whichever
-- web or worker comes first); `rotate` makes it current and keeps the former one
-- published until a grace ends. Keys whose grace has ended are dropped either way.
-- KEYS[1] the push keys hash
-- ARGV[1] 'current' or 'rotate'
-- ARGV[2] the new key's kid, ARGV[3] its entry (JSON: public JWK, sealed private key)
-- ARGV[4] now (ms), ARGV[5] until when a rotated-out key stays published (ms)
-- Returns {the current kid, its entry}.
local now = tonumber(ARGV[4])
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local kid = string.match(fields[i], '^retire:(.+)$')
  if kid and tonumber(fields[i + 1]) <= now then
    redis.call('HDEL', KEYS[1], fields[i], 'key:' .. kid)
  end
end
local current = redis.call('HGET', KEYS[1], 'current')
if ARGV[1] == 'rotate' or not current then
  redis.call('HSET', KEYS[1], 'key:' .. ARGV[2], ARGV[3], 'current', ARGV[2])
  if current and current ~= ARGV[2] then
    redis.call('HSET', KEYS[1], 'retire:' .. current, ARGV[5])
  end
  current = ARGV[2]
end
return {current, redis.call('HGET', KEYS[1], 'key:' .. current)}

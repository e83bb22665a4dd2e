-- Push a job, unless it already exists in any state (scheduled, instant or pending).
-- KEYS[1] jobs index set
-- KEYS[2] jobs scheduled sorted set
-- KEYS[3] jobs instant list
-- ARGV[1] job (msgpack)
-- ARGV[2] due time, ms; ARGV[3] now, ms (due <= now: instant)
-- Returns 1 when pushed, 0 when the job already existed.
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
if tonumber(ARGV[2]) <= tonumber(ARGV[3]) then
  redis.call('LPUSH', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
end
return 1

-- Forget a worker process that has been silent for long (ScrubWorkers), judged by Redis's
-- clock at the moment of deleting, so a process that beat again meanwhile is kept.
-- USES jobs
-- KEYS[1] workers hash
-- ARGV[1] the process's identifier
-- ARGV[2] silence, ms, after which it is forgotten
-- Returns 1 when forgotten, 0 when it is alive (or already gone).
local beat = redis.call('HGET', KEYS[1], ARGV[1])
if not beat or redis_now_ms() - tonumber(beat) <= tonumber(ARGV[2]) then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1

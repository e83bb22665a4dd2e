-- A worker process is alive: its heartbeat, stamped with Redis's clock (not the host's),
-- so that the scrub decision, which reads the same clock, cannot be fooled by skew.
-- USES jobs
-- KEYS[1] workers hash
-- ARGV[1] the process's identifier
-- Returns the time written, ms.
local now = redis_now_ms()
redis.call('HSET', KEYS[1], ARGV[1], now)
return now

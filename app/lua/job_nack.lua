-- A worker gives a job back to run later: pending -> scheduled at now + delay.
-- KEYS[1] the worker's pending list
-- KEYS[2] jobs scheduled sorted set
-- ARGV[1] job
-- ARGV[2] due time, ms
-- Returns 1 when the worker held the job, 0 otherwise (it was scrubbed meanwhile).
local held = redis.call('LREM', KEYS[1], 0, ARGV[1])
if held > 0 then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return held

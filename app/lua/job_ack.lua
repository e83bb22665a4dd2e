-- A worker finished a job: it leaves the worker's pending list and the queue.
-- KEYS[1] jobs index set
-- KEYS[2] the worker's pending list
-- ARGV[1] job
-- Returns 1 when the worker held the job, 0 otherwise (it was scrubbed meanwhile).
local held = redis.call('LREM', KEYS[2], 0, ARGV[1])
if held > 0 then redis.call('SREM', KEYS[1], ARGV[1]) end
return held

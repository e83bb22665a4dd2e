-- A worker is done with a job it holds: acknowledged (gone) or given back for later.
-- USES jobs
-- KEYS[1] jobs index set
-- KEYS[2] jobs scheduled sorted set
-- KEYS[3] jobs instant list
-- KEYS[4] the worker's pending list
-- ARGV[1] job
-- ARGV[2] due time, ms, to run it again (a nack); -1 to acknowledge it
-- ARGV[3] now, ms
-- Returns 1 when the worker held the job, 0 when it did not (it was scrubbed meanwhile):
-- then nothing changed.
local due = tonumber(ARGV[2])
if due < 0 then due = nil end
if job_settle(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], due, tonumber(ARGV[3])) then
  return 1
end
return 0

-- Push a job, unless it already exists in any state (scheduled, instant or pending).
-- USES jobs
-- KEYS[1] jobs index set
-- KEYS[2] jobs scheduled sorted set
-- KEYS[3] jobs instant list
-- ARGV[1] job (msgpack)
-- ARGV[2] due time, ms; ARGV[3] now, ms (due <= now: instant)
-- Returns 1 when pushed, 0 when the job already existed.
if job_push(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])) then
  return 1
end
return 0

-- Move scheduled jobs that are due to the instant list, oldest deadline first.
-- USES jobs
-- KEYS[1] jobs scheduled sorted set
-- KEYS[2] jobs instant list
-- ARGV[1] now, ms
-- ARGV[2] most jobs to move in one call (bounds the script's run time)
-- Returns {jobs moved, score of the next scheduled job or -1}.
local moved, next_at = job_promote(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))
return {moved, next_at}

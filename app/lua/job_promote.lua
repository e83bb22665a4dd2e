-- Move scheduled jobs that are due to their instant list, oldest deadline first, for one
-- or several places (every shard at once on a single Redis; one per call on a cluster).
-- USES jobs
-- KEYS[2i-1], KEYS[2i]: place i's jobs scheduled sorted set and jobs instant list
-- ARGV[1] now, ms
-- ARGV[2] most jobs to move per place in one call (bounds the script's run time)
-- Returns {jobs moved, the earliest score of a job still scheduled, or -1}.
local moved, earliest = 0, -1
for i = 1, #KEYS, 2 do
  local n, next_at = job_promote(KEYS[i], KEYS[i + 1], tonumber(ARGV[1]), tonumber(ARGV[2]))
  moved = moved + n
  if next_at >= 0 and (earliest < 0 or next_at < earliest) then earliest = next_at end
end
return {moved, earliest}

-- Give back the jobs of one holder (a worker thread) whose process is dead: silent for
-- longer than the given silence by Redis's own clock, so clock skew between hosts can
-- never make a live worker look dead. Also used by a holder on itself, unconditionally,
-- to recover after an error, and by ScrubWorkers to forget a long-dead holder.
-- USES jobs
-- KEYS[1] the holder's pending list
-- KEYS[2] jobs instant list
-- KEYS[3] jobs pending index set
-- KEYS[4] workers hash (process -> last heartbeat, ms by Redis TIME)
-- ARGV[1] the holder (`<process>/<slot>`)
-- ARGV[2] its process
-- ARGV[3] silence, ms, after which the process counts as dead; 0 = scrub unconditionally
-- ARGV[4] '1' to also remove the holder from the pending index (forgetting it)
-- Returns the number of jobs given back, or -1 when the process is alive (nothing done).
local moved = job_scrub(KEYS[1], KEYS[2], KEYS[4], ARGV[2], tonumber(ARGV[3]))
if moved >= 0 and ARGV[4] == '1' then redis.call('SREM', KEYS[3], ARGV[1]) end
return moved

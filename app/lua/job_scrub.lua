-- Give back the jobs a dead worker held: pending -> instant, taken next (right end).
-- KEYS[1] the dead worker's pending list
-- KEYS[2] jobs instant list
-- KEYS[3] jobs pending index set
-- ARGV[1] the worker's identifier
-- Returns the number of jobs given back.
local moved = 0
while true do
  local job = redis.call('RPOP', KEYS[1])
  if not job then break end
  redis.call('RPUSH', KEYS[2], job)
  moved = moved + 1
end
redis.call('SREM', KEYS[3], ARGV[1])
return moved

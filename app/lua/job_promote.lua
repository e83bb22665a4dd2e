-- Move scheduled jobs that are due to the instant list, oldest deadline first.
-- KEYS[1] jobs scheduled sorted set
-- KEYS[2] jobs instant list
-- ARGV[1] now, ms
-- ARGV[2] most jobs to move in one call (bounds the script's run time)
-- Returns {jobs moved, score of the next scheduled job or -1}.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  redis.call('ZREM', KEYS[1], job)
  redis.call('LPUSH', KEYS[2], job)
end
local next_job = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if next_job[2] then return {#due, tonumber(next_job[2])} end
return {#due, -1}

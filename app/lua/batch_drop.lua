-- Autodrop: delete the oldest batches of one lane, across subscribers, to free memory.
-- Each dropped event is counted globally and on its subscriber; a batch in flight is
-- skipped (its delivery settles it).
-- USES batches
-- KEYS[1] event gauge hash
-- KEYS[2] batch gauge hash
-- KEYS[3] counters hash
-- KEYS[4] the lane's batch index sorted set
-- ARGV[1] key prefix
-- ARGV[2] lane
-- ARGV[3] most batches to drop
-- Returns {batches dropped, events dropped}.
local prefix, lane = ARGV[1], tonumber(ARGV[2])
local batches, events = 0, 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[3]) - 1)) do
  local slash = string.find(member, '/', 1, true)
  local token = string.sub(member, 1, slash - 1)
  local id = tostring(tonumber(string.sub(member, slash + 1)))
  local base = prefix .. '{sub:' .. token .. '}:'
  if redis.call('EXISTS', base .. 'batch:' .. id) == 0 then
    redis.call('ZREM', KEYS[4], member)  -- stale: its batch went another way
  elseif not redis.call('LPOS', base .. 'lane:' .. lane, id) then
    -- in a deleted subscriber's trash, counted when it was deleted: just free it
    redis.call('UNLINK', base .. 'batch:' .. id)
    redis.call('ZREM', KEYS[4], member)
  elseif redis.call('HGET', base .. 'subscriber', 'inflight') ~= id then
    local count = math.max(0, redis.call('LLEN', base .. 'batch:' .. id) - 3)
    batch_remove(prefix, token, lane, id, count, KEYS[1], KEYS[2])
    count_dropped(KEYS[3], base .. 'subscriber', 'autodropped', count)
    batches, events = batches + 1, events + count
  end
end
return {batches, events}

-- Autodrop: delete the oldest batches of one lane, across subscribers, to free memory.
-- Each dropped event is counted globally and on its subscriber; a batch in flight (any
-- of lib/batches.lua's flying_batches) is skipped (its delivery settles it).
-- Each subscriber's drop is told as an operational event (lib/operations.lua).
-- USES batches operations
-- KEYS[1] the shard's event gauge hash
-- KEYS[2] the shard's batch gauge hash
-- KEYS[3] the shard's counters hash
-- KEYS[4] the shard's batch index sorted set of the lane
-- ARGV[1] the shard's key base
-- ARGV[2] lane
-- ARGV[3] most batches to drop
-- Returns {batches dropped, events dropped}.
local sb, lane = ARGV[1], tonumber(ARGV[2])
local batches, events = 0, 0
local dropped, order = {}, {}  -- events dropped per subscriber, in the order met
for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[3]) - 1)) do
  local slash = string.find(member, '/', 1, true)
  local s = sub_ctx(sb, string.sub(member, 1, slash - 1))  -- a partition's pid
  local token = s.token
  local id = tostring(tonumber(string.sub(member, slash + 1)))
  local base = s.base
  if redis.call('EXISTS', base .. 'batch:' .. id) == 0 then
    redis.call('ZREM', KEYS[4], member)  -- stale: its batch went another way
  elseif not redis.call('LPOS', s.q .. 'lane:' .. lane, id) then
    -- in a deleted subscriber's trash, counted when it was deleted: just free it
    redis.call('UNLINK', base .. 'batch:' .. id)
    redis.call('ZREM', KEYS[4], member)
  elseif not flying_batches(s)[id] then
    local count = math.max(0, redis.call('LLEN', base .. 'batch:' .. id) - BATCH_HEADER)
    batch_remove(s, lane, id, count)
    count_dropped(s, 'autodropped', count)
    batches, events = batches + 1, events + count
    if not dropped[token] then order[#order + 1] = token end
    dropped[token] = (dropped[token] or 0) + count
  end
end
for _, token in ipairs(order) do
  note_operation(sb, sub_ctx(sb, token).base .. 'subscriber', 'subscriber.dropped',
    {events = dropped[token], reason = 'autodrop'})
end
return {batches, events}

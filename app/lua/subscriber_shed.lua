-- Autodrop's fair share: drop one subscriber's oldest batches, lowest priority first
-- (lane 10, then 9, ... 0; in each lane oldest first, partition after partition), while more than a floor of its
-- events is queued. Whole batches go (a partial one would move coalescing positions);
-- the batches in flight are skipped (its delivery settles them). Each dropped event is
-- counted globally and on the subscriber as autodropped.
-- The drop is told as an operational event (lib/operations.lua).
-- USES batches operations
-- KEYS[1] the subscriber hash
-- KEYS[2] the shard's event gauge hash
-- KEYS[3] the shard's batch gauge hash
-- KEYS[4] the shard's counters hash
-- ARGV[1] the shard's key base
-- ARGV[2] token
-- ARGV[3] floor: events the subscriber keeps (its share)
-- ARGV[4] most batches to drop in this call
-- Returns {batches dropped, events dropped, events still queued}.
local token, floor, most = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local parts = {}  -- every partition, with the batch it has in flight
for _, pid in ipairs(partitions_of(ARGV[1], token)) do
  local s = sub_ctx(ARGV[1], pid)
  parts[#parts + 1] = {s = s, flying = flying_batches(s)}
end
local queued = tonumber(redis.call('HGET', KEYS[2], token) or '0')
local batches, events = 0, 0
for lane = LAST_LANE, 0, -1 do
  for _, part in ipairs(parts) do
    if queued <= floor or batches >= most then break end
    local s = part.s
    for _, id in ipairs(redis.call('LRANGE', s.q .. 'lane:' .. lane, 0, most - 1)) do
      if queued <= floor or batches >= most then break end
      if not part.flying[id] then
        local count = math.max(0, redis.call('LLEN', s.base .. 'batch:' .. id) - BATCH_HEADER)
        batch_remove(s, lane, id, count)
        count_dropped(s, 'autodropped', count)
        batches, events, queued = batches + 1, events + count, queued - count
      end
    end
  end
end
if events > 0 then
  note_operation(ARGV[1], KEYS[1], 'subscriber.dropped',
    {events = events, batches = batches, reason = 'quota'})
end
return {batches, events, queued}

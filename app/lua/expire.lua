-- Remove one subscriber's expired events. Head mode (default) walks each lane from its
-- oldest event and stops at the first live one, cheap when a subscriber's routes share
-- one ttl; entire mode (BUSBAR_CLEANUP_ENTIRE_QUEUE) reads every batch, freeing memory
-- held by expired events queued behind live ones (docs/internals.md, Expire: I/O against memory).
-- The batches in flight (lib/batches.lua's flying_batches) are never touched. Each call
-- reads at most a budget of events, and about SCRIPT_BYTES of them, and returns where to
-- go on, so a large backlog is expired in short steps whatever its events' size.
-- USES batches
-- KEYS[1] the subscriber hash
-- KEYS[2] the shard's event gauge hash
-- KEYS[3] the shard's batch gauge hash
-- KEYS[4] the shard's counters hash
-- ARGV[1] the shard's key base
-- ARGV[2] the partition's pid (the token at concurrency 1; lib/partitions.lua)
-- ARGV[3] now, ms
-- ARGV[4] '1' for entire mode, '0' for head mode
-- ARGV[5] budget: most events read in this call
-- ARGV[6] lane to start at, ARGV[7] position in its list to start at
-- Returns {events removed, lane to go on at or -1 when done, position to go on at}.
local token, now, entire = ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local budget, first_lane = tonumber(ARGV[5]), tonumber(ARGV[6])
local s = sub_ctx(ARGV[1], token)
local base = s.base
local flying = flying_batches(s)
local total, read, bytes = 0, 0, 0
for lane = first_lane, LAST_LANE do
  local pos = 0
  if lane == first_lane then pos = tonumber(ARGV[7]) end
  for _, id in ipairs(redis.call('LRANGE', s.q .. 'lane:' .. lane, pos, -1)) do
    if read >= budget or bytes >= SCRIPT_BYTES then return {total, lane, pos} end
    if flying[id] then
      if not entire then break end
      pos = pos + 1
    else
      local key = base .. 'batch:' .. id
      local batch = redis.call('LRANGE', key, 0, -1)
      local live, removed, stopped = {}, 0, false
      for i = BATCH_HEADER + 1, #batch do
        bytes = bytes + #batch[i]
        if not stopped and entry_expired(batch[i], now) then
          removed = removed + 1
        else
          live[#live + 1] = batch[i]
          stopped = not entire
        end
      end
      read = read + #batch - BATCH_HEADER
      if removed > 0 then
        if #live == 0 then
          batch_remove(s, lane, id, removed)
        else
          batch_rewrite(s, id, batch, live)
          redis.call('HINCRBY', KEYS[2], s.token, -removed)
          pos = pos + 1
        end
        count_dropped(s, 'expired', removed)
        total = total + removed
      else
        pos = pos + 1
      end
      if stopped then break end
    end
  end
end
return {total, -1, 0}

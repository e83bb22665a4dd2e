-- One step of a lake replay (spark/replay.py): queue the next events of the selection
-- for the target subscriber, in order, in one lane, and advance the replay's position in
-- the same step, so a step repeated after a crash (the caller names the position it
-- read) queues nothing twice, and a step that never ran is done by the next caller.
-- The events go in batches of their own (up to the subscriber's max each, made whole at
-- once and never current, so due at once), never joined by live events, nor a live
-- batch by them: the lane's current batch is closed first (it is sent sooner, that is
-- all). Each batch is marked with the replay's id, which
-- its delivery names (the Busbar-Replay header). Coalescing routes do not merge them,
-- nor a later live event with its url's state queued before them.
-- USES batches jobs
-- KEYS[1] the subscriber hash
-- KEYS[2] the shard's event gauge hash
-- KEYS[3] the shard's batch gauge hash
-- KEYS[4] the shard's counters hash
-- KEYS[5] the shard's jobs index set of queue main
-- KEYS[6] the shard's jobs scheduled sorted set of queue main
-- KEYS[7] the shard's jobs instant list of queue main
-- KEYS[8] the replay's record hash
-- ARGV[1] the shard's key base
-- ARGV[2] token
-- ARGV[3] now, ms
-- ARGV[4] the replay's id
-- ARGV[5] position the caller read: events of the selection queued before this step
-- ARGV[6] lane
-- ARGV[7] ttl, ms (0: none): each event's expiry counts from now
-- ARGV[8] rows of the selection this step consumes (the events, and rows skipped)
-- ARGV[9..] the events, packed (codec.pack_event, their original id given)
-- Returns {events queued, position after}: {-2, position} when the position moved on
-- meanwhile (this step already ran), {-1, position} when the subscriber is gone.
local token, now, replay = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local position = tonumber(redis.call('HGET', KEYS[8], 'position') or '0')
if position ~= tonumber(ARGV[5]) then return {-2, position} end
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'partitions', 'draining')
if not meta[1] then return {-1, position} end
local max_events, lane = tonumber(meta[1]), tonumber(ARGV[6])
local n = tonumber(meta[2] or '1')
local ttl = tonumber(ARGV[7])
local expires = '0'
if ttl > 0 then expires = string.format('%d', now + ttl) end
local count, new_batches = #ARGV - 8, 0
-- each event in its ordering key's partition, in order there
local parts, order, held = {}, {}, {}  -- pid -> context, pids as met, pid -> entries
for e = 9, #ARGV do
  local entry = expires .. '|' .. ARGV[e]
  local s = part_for(parts, ARGV[1], token, n, entry)
  if not held[s.pid] then held[s.pid], order[#order + 1] = {}, s.pid end
  table.insert(held[s.pid], entry)
  coalesce_unmap(s, entry)  -- lib/batches.lua: a later live state merges with nothing before it
end
for _, pid in ipairs(order) do
  local s, entries = parts[pid], held[pid]
  redis.call('DEL', s.q .. 'current:' .. lane)
  -- whole batches at once, never current: due now, and no live event joins them
  for first = 1, #entries, max_events do
    local last = math.min(first + max_events - 1, #entries)
    local id = batch_new(s, lane, now)
    for from = first, last, 1000 do  -- unpack() has a limit below the largest batch
      redis.call('RPUSH', s.base .. 'batch:' .. id, unpack(entries, from, math.min(from + 999, last)))
    end
    redis.call('HSET', s.base .. 'replayed', id, replay)
    new_batches = new_batches + 1
  end
end
if count > 0 then
  redis.call('HINCRBY', KEYS[2], token, count)
  if new_batches > 0 then redis.call('HINCRBY', KEYS[3], token, new_batches) end
  redis.call('HINCRBY', KEYS[4], 'events.lake_replayed', count)
  -- paused: due once resumed; draining a change of concurrency: once it is done
  if redis.call('HEXISTS', KEYS[1], 'paused_at') == 0 and not meta[3] then
    for _, pid in ipairs(order) do
      job_due_by(KEYS[5], KEYS[6], KEYS[7], redis.call('HGET', parts[pid].flight, 'job'), now, now)
    end
  end
end
position = position + tonumber(ARGV[8])
redis.call('HSET', KEYS[8], 'position', position, 'updated_at', now)
return {count, position}

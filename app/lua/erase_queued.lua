-- One step of an erasure (lib/erasure.lua) over one partition's queued batches: the
-- entity's entries leave their batches (a batch left empty goes), their coalescing map
-- entries with them. The batches in flight (lib/batches.lua's flying_batches) are never
-- touched: one of them that holds the entity is counted `held` (and `pass.held` on the
-- receipt), and the erasure passes again once it has settled. Where it
-- goes on is kept on the shard's receipt (`q:<pid>`: `<lane>:<position>`, or `done`), so
-- a step repeated after a crash, or run by two workers at once, erases nothing twice.
-- Reads at most a budget of events, and about SCRIPT_BYTES, in one call.
-- USES batches erasure
-- KEYS[1] the subscriber hash
-- KEYS[2] the shard's event gauge hash
-- KEYS[3] the shard's batch gauge hash
-- KEYS[4] the shard's counters hash
-- KEYS[5] the erasure's receipt on the shard
-- KEYS[6] the erasure's set of batches that held the entity (`<name>/<batch id>`)
-- ARGV[1] the shard's key base
-- ARGV[2] the partition's pid (the token at concurrency 1; lib/partitions.lua)
-- ARGV[3] 'url' or 'key', ARGV[4] the url or key, ARGV[5] before (ms), ARGV[6] topics
--   (newline-separated; '' for all)
-- ARGV[7] budget: most events read in this call
-- Returns {events removed, 1 when the partition is done else 0, batches in flight held}.
local m = erasure_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
local budget, record, field = tonumber(ARGV[7]), KEYS[5], 'q:' .. ARGV[2]
local cursor = redis.call('HGET', record, field)
if cursor == 'done' then return {0, 1, 0} end
if redis.call('EXISTS', KEYS[1]) == 0 then  -- the subscriber is gone, and its queues
  redis.call('HSET', record, field, 'done')
  return {0, 1, 0}
end
local s = sub_ctx(ARGV[1], ARGV[2])
local first_lane, first_pos = 0, 0
if cursor then
  local colon = string.find(cursor, ':', 1, true)
  first_lane, first_pos = tonumber(string.sub(cursor, 1, colon - 1)), tonumber(string.sub(cursor, colon + 1))
elseif m.by == 'url' then  -- the url's own map entry, wherever it points
  erasure_count(record, 'coalescing.entries', redis.call('HDEL', s.q .. 'coalesce', m.needle))
end
local name = redis.call('HGET', KEYS[1], 'name') or ''
local flying = flying_batches(s)
local total, read, bytes, held = 0, 0, 0, 0

-- map entries (of key erasures: a url's own went above) that point at an entry erased
local function mapped_away(id, batch, gone)
  if m.by == 'url' or redis.call('EXISTS', s.q .. 'coalesce') == 0 then return 0 end
  local n = 0
  for i in pairs(gone) do
    local where = redis.call('HGET', s.q .. 'coalesce', entry_url(batch[i]))
    if where == id .. ':' .. (i - 1) then n = n + 1 end
  end
  return n
end

for lane = first_lane, LAST_LANE do
  local pos = 0
  if lane == first_lane then pos = first_pos end
  for _, id in ipairs(redis.call('LRANGE', s.q .. 'lane:' .. lane, pos, -1)) do
    if read >= budget or bytes >= SCRIPT_BYTES then
      redis.call('HSET', record, field, lane .. ':' .. pos)
      erasure_count(record, 'pass.held', held)
      return {total, 0, held}
    end
    local key = s.base .. 'batch:' .. id
    local batch = redis.call('LRANGE', key, 0, -1)
    local live, gone, removed = {}, {}, 0
    for i = BATCH_HEADER + 1, #batch do
      bytes = bytes + #batch[i]
      if erasure_matches(m, batch[i]) then
        gone[i] = true
        removed = removed + 1
      else
        live[#live + 1] = batch[i]
      end
    end
    read = read + #batch - BATCH_HEADER
    if removed > 0 then redis.call('SADD', KEYS[6], name .. '/' .. id) end
    if removed > 0 and flying[id] then
      held = held + 1
      pos = pos + 1
    elseif removed > 0 then
      erasure_count(record, 'coalescing.entries', mapped_away(id, batch, gone))
      if #live == 0 then
        batch_remove(s, lane, id, removed)
        erasure_count(record, 'queued.batches_removed', 1)
      else
        batch_rewrite(s, id, batch, live)
        redis.call('HINCRBY', KEYS[2], s.token, -removed)
        erasure_count(record, 'queued.batches_rewritten', 1)
        pos = pos + 1
      end
      count_dropped(s, 'erased', removed)
      erasure_count(record, 'queued.events', removed)
      total = total + removed
    else
      pos = pos + 1
    end
  end
end
redis.call('HSET', record, field, 'done')
erasure_count(record, 'pass.held', held)
return {total, 1, held}

-- Shared by every script that adds, removes or rewrites queued events (publish, replay,
-- deliver, expire, autodrop, subscriber delete): prepended to a script whose header
-- says `-- USES batches`, so this bookkeeping is written once. Partitions and their
-- contexts (`s`) are lib/partitions.lua's, always prepended before this one.
--
-- A batch's member in its lane's index: the id zero-padded, so batches created in the
-- same millisecond (equal scores, ordered by member) still sort oldest first.
local function index_member(token, id)
  return token .. '/' .. string.format('%012d', tonumber(id))
end

-- The url of a queued entry (`<expires_at>|<msgpack [topic, type, url, t, data]>`).
local function entry_url(entry)
  return cmsgpack.unpack(string.sub(entry, string.find(entry, '|', 1, true) + 1))[3]
end

-- Whether a queued entry has expired at `now`.
local function entry_expired(entry, now)
  local expires = tonumber(string.sub(entry, 1, string.find(entry, '|', 1, true) - 1))
  return expires > 0 and expires <= now
end

-- The map entries among `entries` that point into batch `id`, forgotten: list index ->
-- url (a rewrite re-points exactly these, each at its own entry's new place).
local function coalesce_forget(s, id, entries)
  local mapped = {}
  local map = s.q .. 'coalesce'
  if redis.call('EXISTS', map) == 0 then return mapped end
  local mine = id .. ':'
  for _, entry in ipairs(entries) do
    local url = entry_url(entry)
    local where = redis.call('HGET', map, url)
    if where and string.sub(where, 1, #mine) == mine then
      redis.call('HDEL', map, url)
      mapped[tonumber(string.sub(where, #mine + 1))] = url
    end
  end
  return mapped
end

-- `entry` (of `url`, when the caller knows it) was queued in `s` by anything but a
-- coalescing route: a route that does not coalesce, a replay, a move. It is now its
-- url's latest queued event, so the url's map entry goes: a later coalescing event
-- merges with nothing older than it (docs/routes.md: "the latest queued event of that
-- url (itself from a coalescing route)"). Without this, that later event replaced the
-- older coalescing state in place, ahead of this one (found by the property test,
-- spec/app/delivery/test_random_subscriptions.py). One EXISTS a partition a script
-- (`s.mapped`, set by whoever fills the map), one HDEL an event while the map exists.
local function coalesce_unmap(s, entry, url)
  if s.mapped == nil then s.mapped = redis.call('EXISTS', s.q .. 'coalesce') == 1 end
  if s.mapped then redis.call('HDEL', s.q .. 'coalesce', url or entry_url(entry)) end
end

-- A new, empty batch at the end of the lane (not current: the caller decides): its id.
-- The header is `lane, created_at, attempts` (BATCH_HEADER of them).
local function batch_new(s, lane, now)
  local id = tostring(redis.call('INCR', s.base .. 'seq'))
  redis.call('RPUSH', s.base .. 'batch:' .. id, lane, now, 0)
  redis.call('RPUSH', s.q .. 'lane:' .. lane, id)
  redis.call('ZADD', s.shard .. 'batches:index:' .. lane, now, index_member(s.pid, id))
  return id
end

-- Append an entry to the lane's current batch (a new batch when the lane has none).
-- Returns the batch id, the entry's list index, whether the batch is new, and whether
-- it is now full (then it is promoted: no longer current). Full: `max_events` entries,
-- or BATCH_BYTES bytes of the entries that count (the one that reaches it closes the
-- batch), so that every script that reads or copies a whole batch (delivery, ack and its
-- log, expire, dead letters) is bounded in bytes as in events, whatever their size. An
-- entry counts (`filled`: bytes by batch id, while current) when `max_events` of its size
-- would reach BATCH_BYTES: smaller ones, which `max_events` alone keeps under it, cost no
-- bookkeeping, and a batch holds at most twice BATCH_BYTES and one entry.
local function batch_append(s, lane, entry, now, max_events)
  local current = s.q .. 'current:' .. lane
  local id = redis.call('GET', current)
  local new = false
  if not id then
    id = batch_new(s, lane, now)
    redis.call('SET', current, id)
    new = true
  end
  local length = redis.call('RPUSH', s.base .. 'batch:' .. id, entry)
  local full = length - BATCH_HEADER >= max_events
  if not full and #entry * max_events >= BATCH_BYTES then
    full = redis.call('HINCRBY', s.base .. 'filled', id, #entry) >= BATCH_BYTES
  end
  if full then
    redis.call('DEL', current)
    redis.call('HDEL', s.base .. 'filled', id)
  end
  return id, length - 1, new, full
end

-- Forget a batch that leaves the queue holding `count` events: its lane entry, its
-- current mark, its index entry, its coalescing entries and the gauges.
local function batch_remove(s, lane, id, count)
  if redis.call('EXISTS', s.q .. 'keys') == 1 then  -- an aside partition's: counted out
    aside_count(s, redis.call('LRANGE', s.base .. 'batch:' .. id, BATCH_HEADER, -1), -1)
  end
  if redis.call('EXISTS', s.q .. 'coalesce') == 1 then
    coalesce_forget(s, id, redis.call('LRANGE', s.base .. 'batch:' .. id, BATCH_HEADER, -1))
  end
  redis.call('LREM', s.q .. 'lane:' .. lane, 1, id)
  redis.call('DEL', s.base .. 'batch:' .. id)
  redis.call('HDEL', s.base .. 'first_attempt', id)
  redis.call('HDEL', s.base .. 'replayed', id)
  redis.call('HDEL', s.base .. 'filled', id)
  if redis.call('GET', s.q .. 'current:' .. lane) == id then
    redis.call('DEL', s.q .. 'current:' .. lane)
  end
  redis.call('ZREM', s.shard .. 'batches:index:' .. lane, index_member(s.pid, id))
  redis.call('HINCRBY', s.batches, s.token, -1)
  if count > 0 then redis.call('HINCRBY', s.events, s.token, -count) end
  drain_check(s)
end

-- Rewrite batch `id` (list `batch`, header included) with only the `live` entries (in
-- their order in `batch`), moving their coalescing entries to their new positions: the
-- map entry that pointed at an entry that stays points at that same entry again, never
-- at another of its url (which may be one that does not coalesce: it was, and a later
-- coalescing event replaced that one, found by the property test), and goes with it.
local function batch_rewrite(s, id, batch, live)
  local old = {}
  for i = BATCH_HEADER + 1, #batch do old[#old + 1] = batch[i] end
  if redis.call('EXISTS', s.q .. 'keys') == 1 then  -- an aside partition's: recounted
    aside_count(s, old, -1)
    aside_count(s, live, 1)
  end
  local mapped = coalesce_forget(s, id, old)
  local key = s.base .. 'batch:' .. id
  redis.call('DEL', key)
  redis.call('RPUSH', key, unpack(batch, 1, BATCH_HEADER))
  for i = 1, #live, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', key, unpack(live, i, math.min(i + 999, #live)))
  end
  if next(mapped) == nil then return end
  local j = 1  -- `live` is a subsequence of `batch`: walk both
  for i = BATCH_HEADER + 1, #batch do
    if j > #live then break end
    if batch[i] == live[j] then
      local url = mapped[i - 1]
      if url then redis.call('HSET', s.q .. 'coalesce', url, id .. ':' .. (BATCH_HEADER + j - 1)) end
      j = j + 1
    end
  end
end

-- The batches partition `s` has in flight, as a set of ids: the one begun (`inflight`) and
-- those gathered into the same flight for a broker destination (`more`, space-separated:
-- lib/delivery.lua's gather). Nothing but their flight's ack or fail may touch them.
local function flying_batches(s)
  local f = redis.call('HMGET', s.flight, 'inflight', 'more')
  local set = {}
  if f[1] then set[f[1]] = true end
  if f[2] then
    for id in string.gmatch(f[2], '%S+') do set[id] = true end
  end
  return set
end

-- Coalescing (map: url -> `<batch id>:<list index>` of the latest queued event of that
-- url on a coalescing route; entries are checked before use: batch there, same url, not
-- in flight). A newer event on a coalescing route merges with that older one:
--   same lane:    it replaces the older one in place (keeps its position);
--   another lane: the older one leaves its batch, and the caller queues the newer one in
--                 its own lane, so an event only ever travels in the lane its route gives
--                 it, and the older state can never arrive after the newer one.
-- Returns 'replaced', 'removed', or nil when there is nothing to merge with.
-- `keyed`: the event has an ordering key of its own, which other urls may share; a
-- replacement in place would put the newer state ahead of their events published
-- between the two, so it leaves its place as across lanes: the older one leaves, the
-- newer queues at the end.
local function coalesce_replace(s, url, entry, lane, keyed)
  local where = redis.call('HGET', s.q .. 'coalesce', url)
  if not where then return nil end
  local colon = string.find(where, ':', 1, true)
  local id, pos = string.sub(where, 1, colon - 1), tonumber(string.sub(where, colon + 1))
  if flying_batches(s)[id] then return nil end
  local key = s.base .. 'batch:' .. id
  local old = redis.call('LINDEX', key, pos)
  if not old or entry_url(old) ~= url then return nil end
  local old_lane = tonumber(redis.call('LINDEX', key, BATCH_LANE))
  if old_lane == lane and not keyed then
    redis.call('LSET', key, pos, entry)
    return 'replaced'
  end
  local batch = redis.call('LRANGE', key, 0, -1)
  local live = {}
  for i = BATCH_HEADER + 1, #batch do
    if i - 1 ~= pos then live[#live + 1] = batch[i] end
  end
  if #live == 0 then
    batch_remove(s, old_lane, id, 1)
  else
    batch_rewrite(s, id, batch, live)
    redis.call('HINCRBY', s.events, s.token, -1)
  end
  return 'removed'
end

-- Count events that left unsent: on the shard and on the subscriber.
local function count_dropped(s, field, count)
  if count > 0 then
    redis.call('HINCRBY', s.shard .. 'counters', 'events.' .. field, count)
    redis.call('HINCRBY', s.sub, field, count)
  end
end

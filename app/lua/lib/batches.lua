-- Shared by every script that adds, removes or rewrites queued events (publish, replay,
-- deliver, expire, autodrop, subscriber delete): prepended to a script whose header
-- says `-- USES batches`, so this bookkeeping is written once.

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

-- The urls among `entries` whose coalescing map points into batch `id`; forgets them.
local function coalesce_forget(base, id, entries)
  local mapped = {}
  if redis.call('EXISTS', base .. 'coalesce') == 0 then return mapped end
  local mine = id .. ':'
  for _, entry in ipairs(entries) do
    local url = entry_url(entry)
    local where = redis.call('HGET', base .. 'coalesce', url)
    if where and string.sub(where, 1, #mine) == mine then
      redis.call('HDEL', base .. 'coalesce', url)
      mapped[url] = true
    end
  end
  return mapped
end

-- Append an entry to the lane's current batch (a new batch when the lane has none).
-- Returns the batch id, the entry's list index, whether the batch is new, and whether
-- it is now full (then it is promoted: no longer current).
local function batch_append(prefix, token, lane, entry, now, max_events)
  local base = prefix .. '{sub:' .. token .. '}:'
  local current = base .. 'current:' .. lane
  local id = redis.call('GET', current)
  local new = false
  if not id then
    id = tostring(redis.call('INCR', base .. 'seq'))
    redis.call('RPUSH', base .. 'batch:' .. id, lane, now, 0)
    redis.call('SET', current, id)
    redis.call('RPUSH', base .. 'lane:' .. lane, id)
    redis.call('ZADD', prefix .. 'batches:index:' .. lane, now, index_member(token, id))
    new = true
  end
  local length = redis.call('RPUSH', base .. 'batch:' .. id, entry)
  local full = length - 3 >= max_events
  if full then redis.call('DEL', current) end
  return id, length - 1, new, full
end

-- Forget a batch that leaves the queue holding `count` events: its lane entry, its
-- current mark, its index entry, its coalescing entries and the gauges.
local function batch_remove(prefix, token, lane, id, count, event_gauge, batch_gauge)
  local base = prefix .. '{sub:' .. token .. '}:'
  if redis.call('EXISTS', base .. 'coalesce') == 1 then
    coalesce_forget(base, id, redis.call('LRANGE', base .. 'batch:' .. id, 3, -1))
  end
  redis.call('LREM', base .. 'lane:' .. lane, 1, id)
  redis.call('DEL', base .. 'batch:' .. id)
  redis.call('HDEL', base .. 'first_attempt', id)
  if redis.call('GET', base .. 'current:' .. lane) == id then
    redis.call('DEL', base .. 'current:' .. lane)
  end
  redis.call('ZREM', prefix .. 'batches:index:' .. lane, index_member(token, id))
  redis.call('HINCRBY', batch_gauge, token, -1)
  if count > 0 then redis.call('HINCRBY', event_gauge, token, -count) end
end

-- Rewrite batch `id` (list `batch`, header included) with only the `live` entries,
-- moving their coalescing entries to their new positions.
local function batch_rewrite(base, id, batch, live)
  local old = {}
  for i = 4, #batch do old[#old + 1] = batch[i] end
  local mapped = coalesce_forget(base, id, old)
  local key = base .. 'batch:' .. id
  redis.call('DEL', key)
  redis.call('RPUSH', key, batch[1], batch[2], batch[3])
  for i = 1, #live, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', key, unpack(live, i, math.min(i + 999, #live)))
  end
  for i, entry in ipairs(live) do
    local url = entry_url(entry)
    if mapped[url] then redis.call('HSET', base .. 'coalesce', url, id .. ':' .. (i + 2)) end
  end
end

-- Coalescing (map: url -> `<batch id>:<list index>` of the latest queued event of that
-- url on a coalescing route; entries are checked before use: batch there, same url, not
-- in flight). A newer event on a coalescing route merges with that older one:
--   same lane:    it replaces the older one in place (keeps its position);
--   another lane: the older one leaves its batch, and the caller queues the newer one in
--                 its own lane, so an event only ever travels in the lane its route gives
--                 it, and the older state can never arrive after the newer one.
-- Returns 'replaced', 'removed', or nil when there is nothing to merge with.
local function coalesce_replace(prefix, token, url, entry, lane, event_gauge, batch_gauge)
  local base = prefix .. '{sub:' .. token .. '}:'
  local where = redis.call('HGET', base .. 'coalesce', url)
  if not where then return nil end
  local colon = string.find(where, ':', 1, true)
  local id, pos = string.sub(where, 1, colon - 1), tonumber(string.sub(where, colon + 1))
  if redis.call('HGET', base .. 'subscriber', 'inflight') == id then return nil end
  local key = base .. 'batch:' .. id
  local old = redis.call('LINDEX', key, pos)
  if not old or entry_url(old) ~= url then return nil end
  local old_lane = tonumber(redis.call('LINDEX', key, 0))
  if old_lane == lane then
    redis.call('LSET', key, pos, entry)
    return 'replaced'
  end
  local batch = redis.call('LRANGE', key, 0, -1)
  local live = {}
  for i = 4, #batch do
    if i - 1 ~= pos then live[#live + 1] = batch[i] end
  end
  if #live == 0 then
    batch_remove(prefix, token, old_lane, id, 1, event_gauge, batch_gauge)
  else
    batch_rewrite(base, id, batch, live)
    redis.call('HINCRBY', event_gauge, token, -1)
  end
  return 'removed'
end

-- Count events that left unsent: globally and on the subscriber.
local function count_dropped(counters, subscriber, field, count)
  if count > 0 then
    redis.call('HINCRBY', counters, 'events.' .. field, count)
    redis.call('HINCRBY', subscriber, field, count)
  end
end

-- Shared by every script that adds, removes or rewrites queued events (publish, replay,
-- deliver, expire, autodrop, subscriber delete): prepended to a script whose header
-- says `-- USES batches`, so this bookkeeping is written once.
--
-- A subscriber's partition is named by a context `s`: s.shard, the key base of its shard
-- (`P{s:N}:`), s.base, the base of the subscriber's own keys (`P{s:N}:sub:<token>:`),
-- s.token, s.pid and s.q, s.flight (partitions, below); every key is derived from those,
-- in the shard's slot (app/models/keys.py). The shard's gauges are s.shard ..
-- 'batches:gauges:event' and '...:batch', counted by token.

local function sub_ctx(shard_base, pid)
  local hash = string.find(pid, '#', 1, true)
  local token = hash and string.sub(pid, 1, hash - 1) or pid
  local base = shard_base .. 'sub:' .. token .. ':'
  local q = hash and (base .. 'part:' .. string.sub(pid, hash + 1) .. ':') or base
  return {shard = shard_base, base = base, token = token, pid = pid, q = q,
    sub = base .. 'subscriber', flight = hash and (q .. 'flight') or (base .. 'subscriber'),
    events = shard_base .. 'batches:gauges:event', batches = shard_base .. 'batches:gauges:batch'}
end

-- Partitions (docs/internals.md, Ordering keys). A subscriber of `concurrency` c > 1
-- queues in n = 4c partitions (`partitions` in its hash), each what a subscriber of
-- concurrency 1 is (lanes, current batches, coalescing map, one delivery in flight, its
-- own job and backoff), at most c of them in flight at once (lib/delivery.lua's
-- `flying`): more partitions than deliveries, so that keys that hash together rarely
-- wait for each other. Partition p is named `<token>#<n>.<p>` (a pid; `#` is never in a
-- token), its keys start with s.q
-- (`...:sub:<token>:part:<n>.<p>:`) and its flight (job, inflight, nonce, backoff, streak)
-- is the hash s.flight. With n = 1 the pid is the token and s.q, s.flight are the
-- subscriber's own keys, exactly as before partitions existed. Batch ids come from the
-- subscriber's one sequence, so a batch key `...:sub:<token>:batch:<id>` names one batch
-- whatever its partition.

-- The pid of partition p of a layout of n.
local function partition_pid(token, n, p)
  if n <= 1 then return token end
  return token .. '#' .. n .. '.' .. p
end

-- The partition an event's ordering key falls in: a stable hash (the first 32 bits of
-- its SHA-1, which app/models/partitions.py computes alike) modulo n.
local function partition_of(key, n)
  if n <= 1 then return 0 end
  return tonumber(string.sub(redis.sha1hex(key), 1, 8), 16) % n
end

-- Every partition of a subscriber that may hold batches: its layout's, and while a
-- change of concurrency drains, the old layout's that still hold some (`draining`).
local function partitions_of(shard_base, token)
  local base = shard_base .. 'sub:' .. token .. ':'
  local n = tonumber(redis.call('HGET', base .. 'subscriber', 'partitions') or '1')
  local pids = {}
  for p = 0, n - 1 do pids[#pids + 1] = partition_pid(token, n, p) end
  for _, pid in ipairs(redis.call('SMEMBERS', base .. 'draining')) do pids[#pids + 1] = pid end
  return pids
end

-- The earliest time something queued in partition `s` is due, or nil when nothing is.
local function queue_due(s, now, max_events, timeout)
  local due = nil
  for lane = 0, LAST_LANE do
    local id = redis.call('LINDEX', s.q .. 'lane:' .. lane, 0)
    if id then
      if id ~= redis.call('GET', s.q .. 'current:' .. lane) then return now end
      local key = s.base .. 'batch:' .. id
      if redis.call('LLEN', key) - BATCH_HEADER >= max_events then return now end
      local at = tonumber(redis.call('LINDEX', key, BATCH_CREATED)) + timeout
      if not due or at < due then due = at end
    end
  end
  return due
end

-- Whether partition `s` holds no batch at all.
local function partition_empty(s)
  for lane = 0, LAST_LANE do
    if redis.call('EXISTS', s.q .. 'lane:' .. lane) == 1 then return false end
  end
  return true
end

-- A change of concurrency drains (subscribe.lua): the old layout's partitions that held
-- batches are in the set `draining`, and the new layout's wait. When the last of them
-- has none left, the change is done: the new layout's jobs are due by what they hold.
local function drain_check(s)
  if redis.call('SISMEMBER', s.base .. 'draining', s.pid) == 0 then return end
  if not partition_empty(s) then return end
  redis.call('SREM', s.base .. 'draining', s.pid)
  if redis.call('EXISTS', s.base .. 'draining') == 1 then return end
  local meta = redis.call('HMGET', s.sub, 'max_events', 'timeout', 'paused_at', 'partitions')
  redis.call('HDEL', s.sub, 'draining')
  if not meta[1] or meta[3] then return end  -- gone, or paused: resume makes them due
  local now = redis_now_ms()
  local n = tonumber(meta[4] or '1')
  local jobs = {s.shard .. 'jobs:index:main', s.shard .. 'jobs:scheduled:main',
    s.shard .. 'jobs:instant:main'}
  for p = 0, n - 1 do
    local part = sub_ctx(s.shard, partition_pid(s.token, n, p))
    local due = queue_due(part, now, tonumber(meta[1]), tonumber(meta[2]))
    if due then
      job_due_by(jobs[1], jobs[2], jobs[3], redis.call('HGET', part.flight, 'job'), due, now)
    end
  end
end

-- A batch's member in its lane's index: the id zero-padded, so batches created in the
-- same millisecond (equal scores, ordered by member) still sort oldest first.
local function index_member(token, id)
  return token .. '/' .. string.format('%012d', tonumber(id))
end

-- The url of a queued entry (`<expires_at>|<msgpack [topic, type, url, t, data]>`).
local function entry_url(entry)
  return cmsgpack.unpack(string.sub(entry, string.find(entry, '|', 1, true) + 1))[3]
end

-- The ordering key of a queued entry: the one its publisher gave (the event's ninth
-- element, app/codec.py), else its url.
local function entry_key(entry)
  local event = cmsgpack.unpack(string.sub(entry, string.find(entry, '|', 1, true) + 1))
  return event[9] or event[3]
end

-- The context of the partition `entry` belongs in, among a subscriber's n, kept in
-- `parts` (pid -> context) so a step that queues many entries builds each once.
local function part_for(parts, shard_base, token, n, entry)
  local pid = partition_pid(token, n, n > 1 and partition_of(entry_key(entry), n) or 0)
  if not parts[pid] then parts[pid] = sub_ctx(shard_base, pid) end
  return parts[pid]
end

-- Whether a queued entry has expired at `now`.
local function entry_expired(entry, now)
  local expires = tonumber(string.sub(entry, 1, string.find(entry, '|', 1, true) - 1))
  return expires > 0 and expires <= now
end

-- The urls among `entries` whose coalescing map points into batch `id`; forgets them.
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
      mapped[url] = true
    end
  end
  return mapped
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
-- it is now full (then it is promoted: no longer current).
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
  if full then redis.call('DEL', current) end
  return id, length - 1, new, full
end

-- Forget a batch that leaves the queue holding `count` events: its lane entry, its
-- current mark, its index entry, its coalescing entries and the gauges.
local function batch_remove(s, lane, id, count)
  if redis.call('EXISTS', s.q .. 'coalesce') == 1 then
    coalesce_forget(s, id, redis.call('LRANGE', s.base .. 'batch:' .. id, 3, -1))
  end
  redis.call('LREM', s.q .. 'lane:' .. lane, 1, id)
  redis.call('DEL', s.base .. 'batch:' .. id)
  redis.call('HDEL', s.base .. 'first_attempt', id)
  redis.call('HDEL', s.base .. 'replayed', id)
  if redis.call('GET', s.q .. 'current:' .. lane) == id then
    redis.call('DEL', s.q .. 'current:' .. lane)
  end
  redis.call('ZREM', s.shard .. 'batches:index:' .. lane, index_member(s.pid, id))
  redis.call('HINCRBY', s.batches, s.token, -1)
  if count > 0 then redis.call('HINCRBY', s.events, s.token, -count) end
  drain_check(s)
end

-- Rewrite batch `id` (list `batch`, header included) with only the `live` entries,
-- moving their coalescing entries to their new positions.
local function batch_rewrite(s, id, batch, live)
  local old = {}
  for i = BATCH_HEADER + 1, #batch do old[#old + 1] = batch[i] end
  local mapped = coalesce_forget(s, id, old)
  local key = s.base .. 'batch:' .. id
  redis.call('DEL', key)
  redis.call('RPUSH', key, unpack(batch, 1, BATCH_HEADER))
  for i = 1, #live, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', key, unpack(live, i, math.min(i + 999, #live)))
  end
  for i, entry in ipairs(live) do
    local url = entry_url(entry)
    if mapped[url] then redis.call('HSET', s.q .. 'coalesce', url, id .. ':' .. (i + 2)) end
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
local function coalesce_replace(s, url, entry, lane)
  local where = redis.call('HGET', s.q .. 'coalesce', url)
  if not where then return nil end
  local colon = string.find(where, ':', 1, true)
  local id, pos = string.sub(where, 1, colon - 1), tonumber(string.sub(where, colon + 1))
  if redis.call('HGET', s.flight, 'inflight') == id then return nil end
  local key = s.base .. 'batch:' .. id
  local old = redis.call('LINDEX', key, pos)
  if not old or entry_url(old) ~= url then return nil end
  local old_lane = tonumber(redis.call('LINDEX', key, BATCH_LANE))
  if old_lane == lane then
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

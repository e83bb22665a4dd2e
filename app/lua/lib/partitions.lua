-- A subscriber's partitions (docs/internals.md, Partitions): the context every script
-- names one by, where an event's ordering key falls, and the drain after a change of
-- concurrency. Prepended (after lib/jobs.lua) to every script that uses lib/batches.lua.

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

-- A failing key steps aside (docs/internals.md, Keys set aside): a layout of n > 1
-- partitions has one more, partition n (`<token>#<n>.<n>`, which no key hashes to), the
-- aside partition. When a batch fails twice in a row while the endpoint answers the
-- subscriber's other keys, deliver_fail moves it there with every later event of its
-- keys, and counts each key's entries in the aside partition's hash `keys`: while a key
-- has entries there, its events queue there too (ingest, replays), behind the ones set
-- aside, and the partition it came from goes on with its other keys; when its last
-- entry there leaves (acknowledged, dead-lettered, expired, shed), it goes home. The
-- aside partition retries with its own backoff, one batch at a time, like any partition.
local function last_partition(n)
  if n > 1 then return n end
  return 0
end

-- The keys set aside in a layout of n partitions (n > 1): a hash, key -> its entries
-- queued in the aside partition.
local function aside_keys(shard_base, token, n)
  return shard_base .. 'sub:' .. token .. ':part:' .. n .. '.' .. n .. ':keys'
end

-- Every partition of a subscriber that may hold batches: its layout's (its aside
-- partition included), and while a change of concurrency drains, the old layout's that
-- still hold some (`draining`).
local function partitions_of(shard_base, token)
  local base = shard_base .. 'sub:' .. token .. ':'
  local n = tonumber(redis.call('HGET', base .. 'subscriber', 'partitions') or '1')
  local pids = {}
  for p = 0, last_partition(n) do pids[#pids + 1] = partition_pid(token, n, p) end
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

-- The layout of subscriber `token` (n partitions) due by what each partition holds, once
-- nothing drains before it (unless it is gone or paused: resume makes them due).
local function layout_wake(shard_base, token)
  local sub = shard_base .. 'sub:' .. token .. ':subscriber'
  local meta = redis.call('HMGET', sub, 'max_events', 'timeout', 'paused_at', 'partitions')
  if not meta[1] or meta[3] then return end
  local now = redis_now_ms()
  local n = tonumber(meta[4] or '1')
  local jobs = {shard_base .. 'jobs:index:main', shard_base .. 'jobs:scheduled:main',
    shard_base .. 'jobs:instant:main'}
  for p = 0, n - 1 do
    local part = sub_ctx(shard_base, partition_pid(token, n, p))
    local due = queue_due(part, now, tonumber(meta[1]), tonumber(meta[2]))
    if due then
      job_due_by(jobs[1], jobs[2], jobs[3], redis.call('HGET', part.flight, 'job'), due, now)
    end
  end
end

-- A change of concurrency drains (subscribe.lua): the old layout's partitions that held
-- batches are in the set `draining`, and the new layout's wait. When the last of them
-- has none left, the change is done: the new layout's jobs are due by what they hold.
local function drain_check(s)
  -- an aside partition emptied: whatever its count says, its keys go home
  if redis.call('EXISTS', s.q .. 'keys') == 1 and partition_empty(s) then
    redis.call('DEL', s.q .. 'keys')
  end
  if redis.call('SISMEMBER', s.base .. 'draining', s.pid) == 0 then return end
  if not partition_empty(s) then return end
  redis.call('SREM', s.base .. 'draining', s.pid)
  if redis.call('EXISTS', s.base .. 'draining') == 1 then return end
  redis.call('HDEL', s.sub, 'draining')
  layout_wake(s.shard, s.token)
end

-- The ordering key of a queued entry: the one its publisher gave (the event's ninth
-- element, app/codec.py), else its url.
local function entry_key(entry)
  local event = cmsgpack.unpack(string.sub(entry, string.find(entry, '|', 1, true) + 1))
  return event[9] or event[3]
end

-- The context of the partition `entry` belongs in, among a subscriber's n, kept in
-- `parts` (pid -> context) so a step that queues many entries builds each once.
-- Count `entries` joining (by 1) or leaving (by -1) aside partition `s` in its hash
-- `keys` (key -> its entries queued there): a key whose count falls to 0 goes home.
local function aside_count(s, entries, by)
  local set = s.q .. 'keys'
  for _, entry in ipairs(entries) do
    local k = entry_key(entry)
    if redis.call('HINCRBY', set, k, by) <= 0 then redis.call('HDEL', set, k) end
  end
end

-- A key set aside goes to the aside partition, counted there (the caller queues the entry);
-- `parts['#aside']` keeps whether the layout has any, looked up once per step.
local function part_for(parts, shard_base, token, n, entry)
  local p = 0
  if n > 1 then
    local key = entry_key(entry)
    p = partition_of(key, n)
    local aside = parts['#aside']
    if aside == nil then
      aside = aside_keys(shard_base, token, n)
      if redis.call('EXISTS', aside) == 0 then aside = false end
      parts['#aside'] = aside
    end
    if aside and redis.call('HEXISTS', aside, key) == 1 then p = n end
  end
  local pid = partition_pid(token, n, p)
  if not parts[pid] then parts[pid] = sub_ctx(shard_base, pid) end
  if p == n and n > 1 then aside_count(parts[pid], {entry}, 1) end
  return parts[pid]
end


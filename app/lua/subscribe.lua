-- The shard step of creating or replacing a client's subscription: its settings and
-- the routes it lists. It runs before subscribe_route (the catalog step), so a
-- subscriber exists before anything is routed to it; a retry after a crash in between
-- redoes both. What is already queued keeps the lane and expiry it was queued with.
-- A change of `concurrency` (the number of partitions, lib/partitions.lua) with batches
-- queued keeps each key's order: the old layout's partitions that hold batches drain
-- first (`draining`), and the new layout's deliver once they are empty. A second change
-- while one drains is taken too (a failing endpoint must not hold a subscriber in a
-- layout): the layout it replaces never delivered (it waited for the drain), so its
-- queued events move into the newest layout's partitions, each to its key's, in order
-- (`fold`, below); the newest then waits for the same drain, or, when it is the layout
-- that drains, it is simply the current one again. Costs one step over the events
-- queued since the change before (docs/internals.md, Ordering keys). A change that adds
-- places in flight (lib/places.lua) wakes the partitions waiting in line for them.
-- USES batches places
-- KEYS[1] the subscriber hash
-- KEYS[2] the subscriber's routes hash (topic -> JSON route list)
-- ARGV[1] callback
-- ARGV[2] uuid
-- ARGV[3] '1' when the client gave the uuid, '0' to keep a stored one
-- ARGV[4] timeout ms, ARGV[5] max_events, ARGV[6] max_attempts, ARGV[7] job, ARGV[8] now
-- ARGV[9] the client's name (logs and the delivery log name clients, never by token)
-- ARGV[10] event_ids ('1' or '0'), ARGV[11] salt of the signing secret, kept if one exists
-- ARGV[12] the shard's key base, ARGV[13] token
-- ARGV[14] concurrency c (1 = one partition, the subscriber itself)
-- ARGV[15] the headers sent with each delivery (JSON, secrets sealed:
--          app/services/sealed_headers.py); '[]' removes them, '' keeps the stored ones
-- ARGV[16] how the callback authenticates the bus (JSON: app/models/callback_auth.py);
--          'basic' removes it (the uuid alone), '' keeps the stored one
-- ARGV[17] the TLS client certificate for its callback (JSON, the key sealed:
--          app/models/client_cert.py); '-' removes it, '' keeps the stored one
-- ARGV[18] m, the jobs when c > 1 (0 otherwise): the layout's n = m - 1 partitions and
--          its aside partition (lib/partitions.lua); then ARGV[19..18+m] the jobs of
--          partitions 0..m-1, the aside partition's last
-- ARGV[19+m] the routes' transforms (JSON: app/models/route.py's transform_table), ''
--          for none; a change moves `transform_version` on
-- ARGV[20+m] its destination, a broker in place of the callback (JSON, secrets sealed:
--          app/models/destination.py), '' for none (a callback)
-- ARGV[21+m..] topics, two values each: name, routes (JSON)
-- Returns 1.

-- The waiting layout of `old` partitions into the new one of `n`: every queued entry to
-- its key's partition, lane by lane, batch by batch (so each key's events keep their
-- order, after whatever the new partition held), each new batch created when the batch
-- it came from was (its `timeout` counts from then). Coalescing maps and replay marks of
-- the moved batches are dropped: what they merged stays merged, later events queue
-- beside them. Gauges: the events stay, the batches are recounted.
local function fold(shard_base, token, old, n, max_events)
  local parts, batches = {}, 0
  for p = 0, last_partition(old) do
    local from = sub_ctx(shard_base, partition_pid(token, old, p))
    for lane = 0, LAST_LANE do
      local index = shard_base .. 'batches:index:' .. lane
      for _, id in ipairs(redis.call('LRANGE', from.q .. 'lane:' .. lane, 0, -1)) do
        local key = from.base .. 'batch:' .. id
        local created = tonumber(redis.call('LINDEX', key, BATCH_CREATED))
        for _, entry in ipairs(redis.call('LRANGE', key, BATCH_HEADER, -1)) do
          local to = part_for(parts, shard_base, token, n, entry)
          local _, _, new = batch_append(to, lane, entry, created, max_events)
          coalesce_unmap(to, entry)
          if new then batches = batches + 1 end
        end
        redis.call('DEL', key)
        redis.call('HDEL', from.base .. 'replayed', id)
        redis.call('ZREM', index, index_member(from.pid, id))
        batches = batches - 1
      end
      redis.call('DEL', from.q .. 'lane:' .. lane, from.q .. 'current:' .. lane)
    end
    redis.call('DEL', from.q .. 'coalesce')
    if old > 1 then redis.call('DEL', from.flight) end
  end
  if batches ~= 0 then
    redis.call('HINCRBY', shard_base .. 'batches:gauges:batch', token, batches)
  end
end

-- The number of partitions of the layout that drains (its pids name it: lib/partitions.lua).
local function draining_layout(base)
  local pid = redis.call('SRANDMEMBER', base .. 'draining')
  if not pid then return nil end
  local hash = string.find(pid, '#', 1, true)
  if not hash then return 1 end
  return tonumber(string.sub(pid, hash + 1, string.find(pid, '.', hash, true) - 1))
end

local shard_base, token = ARGV[12], ARGV[13]
local c, m = tonumber(ARGV[14]), tonumber(ARGV[18])
local n = 1
if m > 1 then n = m - 1 end
local layout = redis.call('HMGET', KEYS[1], 'concurrency', 'partitions', 'max_events', 'draining')
local was, old = tonumber(layout[1] or '1'), tonumber(layout[2] or '1')
local existed = layout[3] ~= false
local folding = n ~= old and layout[4]
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'uuid', ARGV[2])
else
  redis.call('HSETNX', KEYS[1], 'uuid', ARGV[2])
end
redis.call('HSET', KEYS[1], 'callback', ARGV[1], 'timeout', ARGV[4], 'max_events', ARGV[5],
  'max_attempts', ARGV[6], 'job', ARGV[7], 'name', ARGV[9], 'event_ids', ARGV[10])
redis.call('HSETNX', KEYS[1], 'secret_salt', ARGV[11])
if ARGV[15] == '[]' then
  redis.call('HDEL', KEYS[1], 'headers')
elseif ARGV[15] ~= '' then
  redis.call('HSET', KEYS[1], 'headers', ARGV[15])
end
if ARGV[16] == 'basic' then
  redis.call('HDEL', KEYS[1], 'auth')
elseif ARGV[16] ~= '' then
  redis.call('HSET', KEYS[1], 'auth', ARGV[16])
end
if ARGV[17] == '-' then
  redis.call('HDEL', KEYS[1], 'client_cert')
elseif ARGV[17] ~= '' then
  redis.call('HSET', KEYS[1], 'client_cert', ARGV[17])
end
local transforms = ARGV[19 + m]
if transforms ~= (redis.call('HGET', KEYS[1], 'transforms') or '') then
  redis.call('HINCRBY', KEYS[1], 'transform_version', 1)
  if transforms == '' then
    redis.call('HDEL', KEYS[1], 'transforms')
  else
    redis.call('HSET', KEYS[1], 'transforms', transforms)
  end
end
if ARGV[20 + m] == '' then
  redis.call('HDEL', KEYS[1], 'destination')
else
  redis.call('HSET', KEYS[1], 'destination', ARGV[20 + m])
end
redis.call('HSETNX', KEYS[1], 'health_points', 100)
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[8])
redis.call('HSETNX', KEYS[1], 'sent', 0)
if n > 1 then
  redis.call('HSET', KEYS[1], 'concurrency', c, 'partitions', n)
  for p = 0, m - 1 do
    redis.call('HSET', sub_ctx(shard_base, partition_pid(token, n, p)).flight, 'job', ARGV[19 + p])
  end
else
  redis.call('HDEL', KEYS[1], 'concurrency', 'partitions')
end
if folding then
  fold(shard_base, token, old, n, tonumber(ARGV[5]))
  local base = shard_base .. 'sub:' .. token .. ':'
  if draining_layout(base) == n then  -- back to the layout that drains: current again
    redis.call('DEL', base .. 'draining')
    redis.call('HDEL', KEYS[1], 'draining')
    layout_wake(shard_base, token)
  end
elseif n ~= old and existed then
  for p = 0, last_partition(old) do
    local s = sub_ctx(shard_base, partition_pid(token, old, p))
    if not partition_empty(s) then
      redis.call('SADD', s.base .. 'draining', s.pid)
    elseif old > 1 then
      -- an in-flight mark left without its batch (data lost) no longer counts as flying
      if redis.call('HEXISTS', s.flight, 'inflight') == 1 then
        redis.call('HINCRBY', KEYS[1], 'flying', -1)
      end
      redis.call('DEL', s.flight, s.q .. 'coalesce', s.q .. 'keys')
    end
  end
  if redis.call('EXISTS', shard_base .. 'sub:' .. token .. ':draining') == 1 then
    redis.call('HSET', KEYS[1], 'draining', was)
  end
end
-- Places freed (a larger concurrency, or marks uncounted above): whoever waits in line
-- (the draining layout's partitions, which wait without their jobs) is woken, one for each
-- place free, as the end of a delivery would wake them; else nobody would take those
-- places before a delivery in flight ended, and with none in flight, never. Paused: the
-- resume makes every partition due.
if redis.call('HEXISTS', KEYS[1], 'paused_at') == 0 then
  line_wake(shard_base, token, {shard_base .. 'jobs:index:main',
    shard_base .. 'jobs:scheduled:main', shard_base .. 'jobs:instant:main'}, tonumber(ARGV[8]))
end
redis.call('DEL', KEYS[2])
for i = 21 + m, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1

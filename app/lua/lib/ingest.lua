-- Queueing published events for one subscriber, shared by publish (the topic step, which
-- on a single Redis also queues) and publish_queue (one shard's step of a publish).

-- `<shard>|<route table>`, a value of a topic's subscribers hash: the shard's number and
-- the packed route table.
local function split_route(value)
  local bar = string.find(value, '|', 1, true)
  return tonumber(string.sub(value, 1, bar - 1)), string.sub(value, bar + 1)
end

-- What the web found for the events ARGV[first], ARGV[first + 5], ...: the fifth value
-- of each is ' <token>=1,3' for each subscriber whose filters 1 and 3 the event matched
-- (tokens hold no space, '=' or ','). Read once per script into {event index -> {token ->
-- ',1,3,'}}, so each (event, subscriber) is one table lookup, whatever the number of
-- subscribers (a search of the string for each would grow with their square).
local function read_matched(first)
  local found = {}
  for e = first, #ARGV, 5 do
    local matched = ARGV[e + 4]
    if matched ~= '' then
      local by_token = {}
      for token, numbers in string.gmatch(matched, ' ([^ =]+)=([^ ]+)') do
        by_token[token] = ',' .. numbers .. ','
      end
      found[e] = by_token
    end
  end
  return found
end

-- The route an event takes when filters decide (app/models/route.py's route_tables): the
-- first of `candidates` ({lane, ttl, coalesce, filter number}, in priority order) whose
-- filter number is 0 (no filter) or among `numbers` (',1,3,': the subscriber's filters
-- the event matched; nil for none). nil: no route of this subscriber takes the event.
local function pick_route(candidates, numbers)
  for _, c in ipairs(candidates) do
    if c[4] == 0 then return c end
    if numbers and string.find(numbers, ',' .. c[4] .. ',', 1, true) then return c end
  end
  return nil
end

-- Queue events ARGV[first], ARGV[first + 5], ... (five values each: type, url, ordering
-- key or '' for the url, packed event, the filters it matched) for subscriber `token` of
-- shard `shard_base` whose route table on the topic is `packed_routes` (`matched`, what
-- read_matched made of the events' fifth values); `jobs` is
-- {index, scheduled, instant} of its shard's main queue. Each event goes to the partition
-- its key falls in (lib/partitions.lua); while a change of concurrency drains, the new
-- layout's jobs wait. An event no route takes because of a filter costs nothing but a
-- count (`filtered`, on the subscriber). Returns how many events were queued, how many
-- merged by coalescing and how many filtered out.
local function ingest_subscriber(shard_base, token, packed_routes, first, now, default_ttl,
    jobs, matched)
  local routes = cmsgpack.unpack(packed_routes)
  local sub = shard_base .. 'sub:' .. token .. ':subscriber'
  local meta = redis.call('HMGET', sub, 'max_events', 'timeout', 'job', 'paused_at',
    'partitions', 'draining')
  if not meta[1] then return 0, 0, 0 end
  local max_events, timeout = tonumber(meta[1]), tonumber(meta[2])
  local n = tonumber(meta[5] or '1')
  local added, coalesced, new_batches, filtered = 0, 0, 0, 0
  local parts, order = {}, {}  -- partitions met: their context and when they are due
  -- keys set aside (lib/partitions.lua) queue in the aside partition, behind their own
  local aside = n > 1 and aside_keys(shard_base, token, n)
  if aside and redis.call('EXISTS', aside) == 0 then aside = false end
  for e = first, #ARGV, 5 do
    local route = routes[ARGV[e]]
    if route and type(route[1]) == 'table' then
      route = pick_route(route, matched[e] and matched[e][token])
      if not route then filtered = filtered + 1 end
    end
    if route then
      local p = 0
      if n > 1 then
        local key = ARGV[e + 2]
        if key == '' then key = ARGV[e + 1] end
        p = partition_of(key, n)
        if aside and redis.call('HEXISTS', aside, key) == 1 then p = n end
      end
      local part = parts[p]
      if not part then
        part = {s = sub_ctx(shard_base, partition_pid(token, n, p))}
        parts[p], order[#order + 1] = part, p
      end
      local s = part.s
      local lane, ttl, coalesce = route[1], route[2], route[3]
      local ttl_ms = default_ttl
      if ttl > 0 then ttl_ms = ttl * 1000 end
      local expires = 0
      if ttl_ms > 0 then expires = now + ttl_ms end
      local entry = string.format('%d', expires) .. '|' .. ARGV[e + 3]
      local keyed = ARGV[e + 2] ~= '' and ARGV[e + 2] ~= ARGV[e + 1]
      local merged = coalesce and coalesce_replace(s, ARGV[e + 1], entry, lane, keyed)
      if merged then
        coalesced = coalesced + 1
        redis.call('HINCRBY', sub, 'coalesced', 1)
      end
      if merged ~= 'replaced' then
        local id, pos, new, full = batch_append(s, lane, entry, now, max_events)
        if coalesce then
          redis.call('HSET', s.q .. 'coalesce', ARGV[e + 1], id .. ':' .. pos)
          s.mapped = true
        else
          coalesce_unmap(s, entry, ARGV[e + 1])  -- lib/batches.lua
        end
        if new then
          new_batches = new_batches + 1
          if not part.due or now + timeout < part.due then part.due = now + timeout end
        end
        if full then part.due = now end
        if p == n and n > 1 then aside_count(s, {entry}, 1) end  -- lib/partitions.lua
        added = added + 1
      end
    end
  end
  if filtered > 0 then redis.call('HINCRBY', sub, 'filtered', filtered) end
  if added > 0 then
    redis.call('HINCRBY', shard_base .. 'batches:gauges:event', token, added)
    if new_batches > 0 then
      redis.call('HINCRBY', shard_base .. 'batches:gauges:batch', token, new_batches)
    end
    -- a paused subscriber's events wait; its job is due again when it resumes; while a
    -- change of concurrency drains, the new layout's wait for the old's (drain_check)
    if not meta[4] and not meta[6] then
      for _, p in ipairs(order) do
        local part = parts[p]
        if part.due then
          local job = meta[3]
          if n > 1 then job = redis.call('HGET', part.s.flight, 'job') end
          job_due_by(jobs[1], jobs[2], jobs[3], job, part.due, now)
        end
      end
    end
  end
  return added, coalesced, filtered
end

-- Count what a step queued, merged and filtered out on one shard.
local function count_ingest(counters, queued, coalesced, filtered)
  if filtered > 0 then redis.call('HINCRBY', counters, 'events.filtered', filtered) end
  if coalesced > 0 then redis.call('HINCRBY', counters, 'events.coalesced', coalesced) end
  if queued > 0 then redis.call('HINCRBY', counters, 'events.added', queued) end
end

-- Queueing published events for one subscriber, shared by publish (the first step of a
-- publish, with the topic's claim and counters) and publish_more (the subscribers a
-- large fan-out leaves for later calls, so no single script runs long).

-- Queue events ARGV[first], ARGV[first + 3], ... (three values each: type, url, packed
-- event) for subscriber `sub`, whose route table on the topic is `packed_routes`. `g` is
-- {event gauge, batch gauge, jobs index, jobs scheduled, jobs instant}. Returns how many
-- events were queued and how many were merged by coalescing.
local function ingest_subscriber(prefix, sub, packed_routes, first, now, default_ttl, g)
  local routes = cmsgpack.unpack(packed_routes)
  local base = prefix .. '{sub:' .. sub .. '}:'
  local meta = redis.call('HMGET', base .. 'subscriber', 'max_events', 'timeout', 'job')
  if not meta[1] then return 0, 0 end
  local max_events, timeout, job = tonumber(meta[1]), tonumber(meta[2]), meta[3]
  local added, coalesced, new_batches, due = 0, 0, 0, nil
  for e = first, #ARGV, 3 do
    local route = routes[ARGV[e]]
    if route then
      local lane, ttl, coalesce = route[1], route[2], route[3]
      local ttl_ms = default_ttl
      if ttl > 0 then ttl_ms = ttl * 1000 end
      local expires = 0
      if ttl_ms > 0 then expires = now + ttl_ms end
      local entry = string.format('%d', expires) .. '|' .. ARGV[e + 2]
      local merged = coalesce and coalesce_replace(prefix, sub, ARGV[e + 1], entry, lane,
        g[1], g[2])
      if merged then
        coalesced = coalesced + 1
        redis.call('HINCRBY', base .. 'subscriber', 'coalesced', 1)
      end
      if merged ~= 'replaced' then
        local id, pos, new, full = batch_append(prefix, sub, lane, entry, now, max_events)
        if coalesce then
          redis.call('HSET', base .. 'coalesce', ARGV[e + 1], id .. ':' .. pos)
        end
        if new then
          new_batches = new_batches + 1
          if not due or now + timeout < due then due = now + timeout end
        end
        if full then due = now end
        added = added + 1
      end
    end
  end
  if added > 0 then
    redis.call('HINCRBY', g[1], sub, added)
    if new_batches > 0 then redis.call('HINCRBY', g[2], sub, new_batches) end
    if due then job_due_by(g[3], g[4], g[5], job, due, now) end
  end
  return added, coalesced
end

-- Count what a step queued and merged.
local function count_ingest(counters, queued, coalesced)
  if coalesced > 0 then redis.call('HINCRBY', counters, 'events.coalesced', coalesced) end
  if queued > 0 then redis.call('HINCRBY', counters, 'events.added', queued) end
end

-- Queueing published events for one subscriber, shared by publish (the topic step, which
-- on a single Redis also queues) and publish_queue (one shard's step of a publish).

-- `<shard>|<route table>`, a value of a topic's subscribers hash: the shard's number and
-- the packed route table.
local function split_route(value)
  local bar = string.find(value, '|', 1, true)
  return tonumber(string.sub(value, 1, bar - 1)), string.sub(value, bar + 1)
end

-- Queue events ARGV[first], ARGV[first + 3], ... (three values each: type, url, packed
-- event) for subscriber `s` (lib/batches.lua's context) whose route table on the topic
-- is `packed_routes`; `jobs` is {index, scheduled, instant} of its shard's main queue.
-- Returns how many events were queued and how many merged by coalescing.
local function ingest_subscriber(s, packed_routes, first, now, default_ttl, jobs)
  local routes = cmsgpack.unpack(packed_routes)
  local meta = redis.call('HMGET', s.base .. 'subscriber', 'max_events', 'timeout', 'job',
    'paused_at')
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
      local merged = coalesce and coalesce_replace(s, ARGV[e + 1], entry, lane)
      if merged then
        coalesced = coalesced + 1
        redis.call('HINCRBY', s.base .. 'subscriber', 'coalesced', 1)
      end
      if merged ~= 'replaced' then
        local id, pos, new, full = batch_append(s, lane, entry, now, max_events)
        if coalesce then
          redis.call('HSET', s.base .. 'coalesce', ARGV[e + 1], id .. ':' .. pos)
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
    redis.call('HINCRBY', s.events, s.token, added)
    if new_batches > 0 then redis.call('HINCRBY', s.batches, s.token, new_batches) end
    -- a paused subscriber's events wait; its job is due again when it resumes
    if due and not meta[4] then job_due_by(jobs[1], jobs[2], jobs[3], job, due, now) end
  end
  return added, coalesced
end

-- Count what a step queued and merged on one shard.
local function count_ingest(counters, queued, coalesced)
  if coalesced > 0 then redis.call('HINCRBY', counters, 'events.coalesced', coalesced) end
  if queued > 0 then redis.call('HINCRBY', counters, 'events.added', queued) end
end

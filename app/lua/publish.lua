-- Ingest events of one topic for all its subscribers, atomically: claim the topic for
-- its first publisher, count the events, append each to the current batch of the lane
-- its route picks (new batch when the lane has none, promoted when full), keep gauges
-- and the batch index, and make sure each subscriber's delivery job is due in time.
-- USES batches jobs
-- KEYS[1] topics set
-- KEYS[2] topic hash (publisher, counter)
-- KEYS[3] topic subscribers hash (token -> route table)
-- KEYS[4] counters hash
-- KEYS[5] event gauge hash
-- KEYS[6] batch gauge hash
-- KEYS[7] jobs index set of queue main
-- KEYS[8] jobs scheduled sorted set of queue main
-- KEYS[9] jobs instant list of queue main
-- KEYS[10] tokens hash (the publisher's token is checked here, atomically with the write)
-- ARGV[1] key prefix
-- ARGV[2] topic name
-- ARGV[3] publisher token
-- ARGV[4] now, ms
-- ARGV[5] default ttl, ms (0 = never expires)
-- ARGV[6..] events, three values each: type, url, packed event
-- Returns {status, events queued}: status 1 ok, -1 the topic belongs to another publisher,
-- -2 the token is unknown (deleted before or while the request ran): nothing written.
-- An event on a coalescing route whose url matches a queued event of the subscriber that
-- is not in flight merges with it (lib/batches.lua, coalesce_replace): in place in the
-- same lane (counted as coalesced, not queued); in another lane the older one leaves and
-- the newer one is queued in its own (counted as coalesced and queued).
local prefix, topic, token = ARGV[1], ARGV[2], ARGV[3]
local now, default_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])

if redis.call('HEXISTS', KEYS[10], token) == 0 then
  return {-2, 0}
end
local publisher = redis.call('HGET', KEYS[2], 'publisher')
if not publisher then
  redis.call('HSET', KEYS[2], 'publisher', token)
  redis.call('SADD', KEYS[1], topic)
elseif publisher ~= token then
  return {-1, 0}
end
local count = (#ARGV - 5) / 3
redis.call('HINCRBY', KEYS[2], 'counter', count)
redis.call('HINCRBY', KEYS[4], 'events.published', count)

local queued, coalesced = 0, 0
local subscribers = redis.call('HGETALL', KEYS[3])
for s = 1, #subscribers, 2 do
  local sub = subscribers[s]
  local routes = cmsgpack.unpack(subscribers[s + 1])
  local base = prefix .. '{sub:' .. sub .. '}:'
  local meta = redis.call('HMGET', base .. 'subscriber', 'max_events', 'timeout', 'job')
  if meta[1] then
    local max_events, timeout, job = tonumber(meta[1]), tonumber(meta[2]), meta[3]
    local added, new_batches, due = 0, 0, nil
    for e = 6, #ARGV, 3 do
      local route = routes[ARGV[e]]
      if route then
        local lane, ttl, coalesce = route[1], route[2], route[3]
        local ttl_ms = default_ttl
        if ttl > 0 then ttl_ms = ttl * 1000 end
        local expires = 0
        if ttl_ms > 0 then expires = now + ttl_ms end
        local entry = string.format('%d', expires) .. '|' .. ARGV[e + 2]
        local merged = coalesce and coalesce_replace(prefix, sub, ARGV[e + 1], entry, lane,
          KEYS[5], KEYS[6])
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
      redis.call('HINCRBY', KEYS[5], sub, added)
      if new_batches > 0 then redis.call('HINCRBY', KEYS[6], sub, new_batches) end
      if due then job_due_by(KEYS[7], KEYS[8], KEYS[9], job, due, now) end
      queued = queued + added
    end
  end
end
if coalesced > 0 then redis.call('HINCRBY', KEYS[4], 'events.coalesced', coalesced) end
if queued > 0 then redis.call('HINCRBY', KEYS[4], 'events.added', queued) end
return {1, queued}

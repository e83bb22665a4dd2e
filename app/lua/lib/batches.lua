-- Shared by the scripts that remove events or batches (deliver, expire, autodrop):
-- prepended to a script whose header says `-- USES batches`, so the bookkeeping of a
-- removed batch is written once.

-- A batch's member in its lane's index: the id zero-padded, so batches created in the
-- same millisecond (equal scores, ordered by member) still sort oldest first.
local function index_member(token, id)
  return token .. '/' .. string.format('%012d', tonumber(id))
end

-- Forget a batch that leaves the queue holding `count` events: its lane entry, its
-- current mark, its index entry and the gauges.
local function batch_remove(prefix, token, lane, id, count, event_gauge, batch_gauge)
  local base = prefix .. '{sub:' .. token .. '}:'
  redis.call('LREM', base .. 'lane:' .. lane, 1, id)
  redis.call('DEL', base .. 'batch:' .. id)
  if redis.call('GET', base .. 'current:' .. lane) == id then
    redis.call('DEL', base .. 'current:' .. lane)
  end
  redis.call('ZREM', prefix .. 'batches:index:' .. lane, index_member(token, id))
  redis.call('HINCRBY', batch_gauge, token, -1)
  if count > 0 then redis.call('HINCRBY', event_gauge, token, -count) end
end

-- Whether a queued entry (`<expires_at>|<event>`) has expired at `now`.
local function entry_expired(entry, now)
  local expires = tonumber(string.sub(entry, 1, string.find(entry, '|', 1, true) - 1))
  return expires > 0 and expires <= now
end

-- Rewrite a batch with only the given entries, keeping its header.
local function batch_rewrite(key, header, entries)
  redis.call('DEL', key)
  redis.call('RPUSH', key, header[1], header[2], header[3])
  for i = 1, #entries, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', key, unpack(entries, i, math.min(i + 999, #entries)))
  end
end

-- Count events that left unsent: globally and on the subscriber.
local function count_dropped(counters, subscriber, field, count)
  if count > 0 then
    redis.call('HINCRBY', counters, 'events.' .. field, count)
    redis.call('HINCRBY', subscriber, field, count)
  end
end

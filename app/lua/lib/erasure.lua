-- Shared by the erasure scripts (erase_*.lua): what one erasure matches, and its
-- shard's receipt. An erasure names one entity by its url or its ordering key, maybe a
-- set of topics, and a time: it matches a queued entry (`<expires_at>|<msgpack event>`,
-- the event `[topic, type, url, t, data, id, traceparent, tracestate, key, schema]`,
-- app/codec.py) of that url (or that key, as its publisher gave it), on one of those
-- topics (every topic when none is named), whose `t` is before that time.
--
-- `m` is built once a script from its ARGV (erasure_of): by ('url' or 'key'), needle
-- (the url or key), before (ms), topics (a set, or nil for all).
local function erasure_of(by, needle, before, topics)
  local wanted = nil
  if topics ~= '' then
    wanted = {}
    for topic in string.gmatch(topics, '[^\n]+') do wanted[topic] = true end
  end
  return {by = by, needle = needle, before = tonumber(before), topics = wanted}
end

-- Whether a queued entry is the entity's. The needle's bytes are in the entry whenever
-- it matches (msgpack keeps strings as they are), so most entries cost one string.find.
local function erasure_matches(m, entry)
  if entry == '' or not string.find(entry, m.needle, 1, true) then return false end
  local bar = string.find(entry, '|', 1, true)
  if not bar then return false end
  local event = cmsgpack.unpack(string.sub(entry, bar + 1))
  local value = event[3]
  if m.by == 'key' then value = event[9] end
  if value ~= m.needle then return false end
  if m.topics and not m.topics[event[1]] then return false end
  return tonumber(event[4]) < m.before
end

-- Count `n` of what was erased on the shard's receipt (`field`, e.g. 'queued.events').
local function erasure_count(record, field, n)
  if n > 0 then redis.call('HINCRBY', record, field, n) end
end

-- A stream entry erased: XDEL'd, and told to the stream's `:erased` companion (the lake's
-- readers count it as read, never as lost, and read `replacement` in its place: the
-- entry's fields with the erased events blanked; '' when nothing of it is left).
local function erasure_xdel(stream, companion, id, replacement)
  redis.call('XDEL', stream, id)
  if companion ~= '' then
    redis.call('HSET', companion, id, replacement)
    redis.call('HINCRBY', companion, 'n', 1)
  end
end

-- One step of an erasure (lib/erasure.lua) over a shard's delivery log: an entry whose
-- events are all the entity's goes; one that holds others too goes and is replaced, in
-- the log's `:erased` companion, by its fields with the entity's events blanked ('') in
-- `events` and, where a transform changed what was sent, in `source` (the events as
-- queued) at the same places, so the lake's readers take it as it was, less them
-- (docs/erasure.md). Entries an earlier
-- erasure replaced so are swept first, in HSCAN steps (`deliveries.sweep` on the receipt:
-- the HSCAN cursor, `done` once through), then the log from the receipt's `deliveries`
-- (the last entry id read) to its end (`pass.deliveries`: done for this pass); the next
-- pass goes on from there. Each batch met
-- that held the entity is added to the erasure's set, for its attempts.
-- USES erasure
-- KEYS[1] the shard's delivery log (stream)
-- KEYS[2] its `:erased` companion hash
-- KEYS[3] the erasure's receipt on the shard
-- KEYS[4] the erasure's set of batches that held the entity (`<name>/<batch id>`)
-- ARGV[1] 'url' or 'key', ARGV[2] the url or key, ARGV[3] before (ms), ARGV[4] topics
-- ARGV[5] budget: most log entries read in this call
-- Returns {events removed, 1 when the log is read to its end else 0}.
local m = erasure_of(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
local log, companion, record, budget = KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[5])
local removed = 0

-- the entity's events of one entry's fields (a flat list) blanked: the fields, how many
-- it had, how many are left, and the batch it was (`<subscriber>/<batch id>`)
local function blank(fields)
  local at, source, subscriber, batch = nil, nil, '', ''
  for i = 1, #fields, 2 do
    if fields[i] == 'events' then at = i + 1 end
    if fields[i] == 'source' then source = i + 1 end
    if fields[i] == 'subscriber' then subscriber = fields[i + 1] end
    if fields[i] == 'batch_id' then batch = fields[i + 1] end
  end
  if not at or not string.find(fields[at], m.needle, 1, true) then return nil end
  local events, gone, left = cmsgpack.unpack(fields[at]), 0, 0
  for i, entry in ipairs(events) do
    if erasure_matches(m, entry) then
      events[i] = ''
      gone = gone + 1
    elseif entry ~= '' then
      left = left + 1
    end
  end
  if gone == 0 then return nil end
  fields[at] = cmsgpack.pack(events)
  if source then  -- the events as queued, where a transform changed them: the same places
    local queued = cmsgpack.unpack(fields[source])
    for i, entry in ipairs(events) do
      if entry == '' then queued[i] = '' end
    end
    fields[source] = cmsgpack.pack(queued)
  end
  redis.call('SADD', KEYS[4], subscriber .. '/' .. batch)
  return fields, gone, left
end

local sweep = redis.call('HGET', record, 'deliveries.sweep') or '0'
if sweep ~= 'done' then
  -- Nothing is dropped from the companion here: an id before the log's first entry may
  -- be one an erasure took from its head (not trimmed), whose other events a lagging
  -- ingest has still to read, and a reader tells a trimmed entry from an erased one by
  -- the companion alone (docs/erasure.md, What stays).
  local reply = redis.call('HSCAN', companion, sweep, 'COUNT', budget)
  local pairs_ = reply[2]
  for i = 1, #pairs_, 2 do
    local id, value = pairs_[i], pairs_[i + 1]
    if id ~= 'n' and value ~= '' then
      local fields, gone, left = blank(cmsgpack.unpack(value))
      if fields then
        redis.call('HSET', companion, id, left > 0 and cmsgpack.pack(fields) or '')
        removed = removed + gone
        erasure_count(record, 'deliveries.entries_rewritten', 1)
      end
    end
  end
  redis.call('HSET', record, 'deliveries.sweep', reply[1] == '0' and 'done' or reply[1])
  erasure_count(record, 'deliveries.events', removed)
  return {removed, 0}
end

local cursor = redis.call('HGET', record, 'deliveries') or '0-0'
local entries = redis.call('XRANGE', log, '(' .. cursor, '+', 'COUNT', budget)
for _, item in ipairs(entries) do
  local fields, gone, left = blank(item[2])
  if fields then
    if left == 0 then
      erasure_xdel(log, companion, item[1], '')
      erasure_count(record, 'deliveries.entries_removed', 1)
    else
      erasure_xdel(log, companion, item[1], cmsgpack.pack(fields))
      erasure_count(record, 'deliveries.entries_rewritten', 1)
    end
    removed = removed + gone
  end
end
if #entries > 0 then redis.call('HSET', record, 'deliveries', entries[#entries][1]) end
erasure_count(record, 'deliveries.events', removed)
if #entries < budget then  -- read to its end: this pass is done with it
  redis.call('HSET', record, 'pass.deliveries', 'done')
  return {removed, 1}
end
return {removed, 0}

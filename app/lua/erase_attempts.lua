-- One step of an erasure (lib/erasure.lua) over an attempt stream: the shard's (the
-- lake's attempts table is written from it) or one subscriber's attempt log. An attempt
-- names no event; what it may hold of the entity is its answer's body, so an attempt of
-- a batch that held the entity (the erasure's set, filled by the queued and delivery
-- log steps before) or whose body names the url or key goes whole; from the shard's
-- stream also into its `:erased` companion, as a tombstone the lake's readers count.
-- The receipt keeps the last entry id read (ARGV[2]; `pass.<ARGV[2]>` once read to its
-- end in this pass), and counts under ARGV[3].
-- USES erasure
-- KEYS[1] the stream
-- KEYS[2] its `:erased` companion hash, or the receipt again for a subscriber's log
--   (which has none: ARGV[4] says which)
-- KEYS[3] the erasure's receipt on the shard
-- KEYS[4] the erasure's set of batches that held the entity (`<name>/<batch id>`)
-- ARGV[1] the url or key
-- ARGV[2] the receipt's field for where to go on
-- ARGV[3] the receipt's field to count the attempts erased in
-- ARGV[4] '' for the shard's stream (entries name their subscriber, a companion is
--   told), else the subscriber's client name (a log of its own; no name is empty)
-- ARGV[5] budget: most entries read in this call
-- Returns {entries removed, 1 when the stream is read to its end else 0}.
local stream, record, needle = KEYS[1], KEYS[3], ARGV[1]
local shard_wide, budget = ARGV[4] == '', tonumber(ARGV[5])
local companion = shard_wide and KEYS[2] or ''
local cursor = redis.call('HGET', record, ARGV[2]) or '0-0'
local entries = redis.call('XRANGE', stream, '(' .. cursor, '+', 'COUNT', budget)
local removed = 0
for _, item in ipairs(entries) do
  local fields, name, batch, body = item[2], ARGV[4], '', ''
  for i = 1, #fields, 2 do
    if fields[i] == 'batch' then batch = fields[i + 1] end
    if fields[i] == 'body' then body = fields[i + 1] end
    if shard_wide and fields[i] == 'subscriber' then name = fields[i + 1] end
  end
  if redis.call('SISMEMBER', KEYS[4], name .. '/' .. batch) == 1
      or string.find(body, needle, 1, true) then
    erasure_xdel(stream, companion, item[1], '')
    removed = removed + 1
  end
end
if #entries > 0 then redis.call('HSET', record, ARGV[2], entries[#entries][1]) end
erasure_count(record, ARGV[3], removed)
if #entries < budget then  -- read to its end: this pass is done with it
  redis.call('HSET', record, 'pass.' .. ARGV[2], 'done')
  return {removed, 1}
end
return {removed, 0}

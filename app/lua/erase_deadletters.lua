-- One step of an erasure (lib/erasure.lua) over one subscriber's dead letters
-- (`<attempts>|<failed_at>|<lane>|<last_status>|<entry>`): the entity's go. Where it
-- goes on is kept on the shard's receipt (`dl:<token>`: a list index, or `done`).
-- USES erasure
-- KEYS[1] the subscriber's dead letters list
-- KEYS[2] the erasure's receipt on the shard
-- ARGV[1] the subscriber's token
-- ARGV[2] 'url' or 'key', ARGV[3] the url or key, ARGV[4] before (ms), ARGV[5] topics
-- ARGV[6] budget: most dead letters read in this call
-- Returns {dead letters removed, 1 when done else 0}.
local m = erasure_of(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
local record, field, budget = KEYS[2], 'dl:' .. ARGV[1], tonumber(ARGV[6])
local cursor = redis.call('HGET', record, field)
if cursor == 'done' then return {0, 1} end
local from = tonumber(cursor or 0)
local letters = redis.call('LRANGE', KEYS[1], from, from + budget - 1)
local mark = 'erased'  -- no dead letter is: each starts with its attempts, a number
local removed = 0
for i, letter in ipairs(letters) do
  local at = 0
  for _ = 1, 4 do at = string.find(letter, '|', at + 1, true) or #letter end
  if erasure_matches(m, string.sub(letter, at + 1)) then
    redis.call('LSET', KEYS[1], from + i - 1, mark)
    removed = removed + 1
  end
end
if removed > 0 then redis.call('LREM', KEYS[1], 0, mark) end
erasure_count(record, 'deadletters.events', removed)
if #letters < budget then
  redis.call('HSET', record, field, 'done')
  return {removed, 1}
end
redis.call('HSET', record, field, from + #letters - removed)
return {removed, 0}

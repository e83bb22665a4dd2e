-- Retention (app/services/retention.py): one step over a subscriber's dead letters
-- (`<attempts>|<failed_at>|<lane>|<last_status>|<entry>`), removing those whose
-- topic's payload retention has run out since they failed. Counted on the subscriber
-- (`deadletters_retired`) and the shard (`deadletters.retired`).
-- KEYS[1] the subscriber's dead letters list
-- KEYS[2] the subscriber hash
-- KEYS[3] the shard's counters hash
-- ARGV[1] now (ms), ARGV[2] the default retention (ms; 0 = keep)
-- ARGV[3] JSON {topic: retention ms} of the topics with their own (0 = keep)
-- ARGV[4] the list index to start at, ARGV[5] budget: most dead letters read
-- Returns {dead letters removed, the index to go on at or -1 when done}.
local now, default = tonumber(ARGV[1]), tonumber(ARGV[2])
local own = cjson.decode(ARGV[3])
local from, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local letters = redis.call('LRANGE', KEYS[1], from, from + budget - 1)
local mark, removed = 'retired', 0  -- no dead letter is the mark: each starts with a number
for i, letter in ipairs(letters) do
  local a = string.find(letter, '|', 1, true)
  local b = string.find(letter, '|', a + 1, true)
  local failed_at = tonumber(string.sub(letter, a + 1, b - 1))
  local at = b
  for _ = 1, 3 do at = string.find(letter, '|', at + 1, true) end
  local event = cmsgpack.unpack(string.sub(letter, at + 1))
  local keep = own[event[1]]
  if keep == nil then keep = default end
  if keep > 0 and failed_at + keep <= now then
    redis.call('LSET', KEYS[1], from + i - 1, mark)
    removed = removed + 1
  end
end
if removed > 0 then
  redis.call('LREM', KEYS[1], 0, mark)
  redis.call('HINCRBY', KEYS[2], 'deadletters_retired', removed)
  redis.call('HINCRBY', KEYS[3], 'deadletters.retired', removed)
end
if #letters < budget then return {removed, -1} end
return {removed, from + #letters - removed}

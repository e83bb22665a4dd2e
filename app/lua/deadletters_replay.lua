-- Requeue the oldest of a subscriber's dead letters, at most a budget per call (and about
-- SCRIPT_BYTES of them, read a hundred at a time: large events are few a call), in their
-- original order and lanes (each in its ordering key's partition), and take them off the list in the same step (so a replay
-- interrupted between calls is finished by replaying again, nothing twice). Each keeps the expiry it was first queued with (an event past
-- its ttl is dropped at delivery and counted as expired, never sent).
-- USES batches jobs
-- KEYS[1] the subscriber hash
-- KEYS[2] the subscriber's dead letters list
-- KEYS[3] the shard's event gauge hash
-- KEYS[4] the shard's batch gauge hash
-- KEYS[5] the shard's counters hash
-- KEYS[6] the shard's jobs index set of queue main
-- KEYS[7] the shard's jobs scheduled sorted set of queue main
-- KEYS[8] the shard's jobs instant list of queue main
-- ARGV[1] the shard's key base
-- ARGV[2] token
-- ARGV[3] now, ms
-- ARGV[4] budget: most dead letters requeued in this call
-- Returns {events requeued, dead letters left}, or {-1, 0} when there is no such
-- subscriber.
local token, now = ARGV[2], tonumber(ARGV[3])
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'partitions', 'draining')
if not meta[1] then return {-1, 0} end
local max_events, timeout = tonumber(meta[1]), tonumber(meta[2])
local n = tonumber(meta[3] or '1')
local dead, budget, bytes = {}, tonumber(ARGV[4]), 0
while #dead < budget and bytes < SCRIPT_BYTES do
  local chunk = redis.call('LRANGE', KEYS[2], #dead, math.min(#dead + 100, budget) - 1)
  for _, letter in ipairs(chunk) do
    if bytes >= SCRIPT_BYTES then break end
    dead[#dead + 1], bytes = letter, bytes + #letter
  end
  if #chunk < 100 then break end
end
local new_batches, parts, due = 0, {}, {}  -- due: pid -> when its partition is due
for _, letter in ipairs(dead) do
  -- `<attempts>|<failed_at>|<lane>|<last_status>|<entry>`
  local a = string.find(letter, '|', 1, true)
  local b = string.find(letter, '|', a + 1, true)
  local c = string.find(letter, '|', b + 1, true)
  local d = string.find(letter, '|', c + 1, true)
  local lane = tonumber(string.sub(letter, b + 1, c - 1))
  local entry = string.sub(letter, d + 1)
  local s = part_for(parts, ARGV[1], token, n, entry)  -- its key's partition
  local _, _, new, full = batch_append(s, lane, entry, now, max_events)
  coalesce_unmap(s, entry)  -- requeued as it was: the latest of its url, merged with nothing
  if new then
    new_batches = new_batches + 1
    if not due[s.pid] then due[s.pid] = now + timeout end
  end
  if full then due[s.pid] = now end
end
redis.call('LTRIM', KEYS[2], #dead, -1)
if #dead > 0 then
  redis.call('HINCRBY', KEYS[3], token, #dead)
  if new_batches > 0 then redis.call('HINCRBY', KEYS[4], token, new_batches) end
  redis.call('HINCRBY', KEYS[5], 'events.replayed', #dead)
  -- paused: due once resumed; draining a change of concurrency: once it is done
  local paused = redis.call('HEXISTS', KEYS[1], 'paused_at') == 1
  if not paused and not meta[4] then
    for pid, at in pairs(due) do
      job_due_by(KEYS[6], KEYS[7], KEYS[8], redis.call('HGET', parts[pid].flight, 'job'), at, now)
    end
  end
end
return {#dead, redis.call('LLEN', KEYS[2])}

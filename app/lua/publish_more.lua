-- A later step of a large publish (see publish.lua): queue the events for the named
-- subscribers, those still subscribed to the topic, with the route each has now.
-- USES batches jobs ingest
-- KEYS[1] topic subscribers hash (token -> route table)
-- KEYS[2] counters hash
-- KEYS[3] event gauge hash
-- KEYS[4] batch gauge hash
-- KEYS[5] jobs index set of queue main
-- KEYS[6] jobs scheduled sorted set of queue main
-- KEYS[7] jobs instant list of queue main
-- ARGV[1] key prefix
-- ARGV[2] now, ms
-- ARGV[3] default ttl, ms (0 = never expires)
-- ARGV[4] n, the number of subscribers named
-- ARGV[5..4+n] subscriber tokens
-- ARGV[5+n..] events, three values each: type, url, packed event
-- Returns the number of events queued.
local prefix, now, default_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local g = {KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local queued, coalesced = 0, 0
for i = 5, 4 + n do
  local routes = redis.call('HGET', KEYS[1], ARGV[i])
  if routes then
    local added, merged = ingest_subscriber(prefix, ARGV[i], routes, 5 + n, now,
      default_ttl, g)
    queued, coalesced = queued + added, coalesced + merged
  end
end
count_ingest(KEYS[2], queued, coalesced)
return queued

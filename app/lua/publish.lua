-- The first step of a publish, atomic: check the publisher's token, claim the topic for
-- its first publisher, count the events, then queue them (lib/ingest.lua) for the
-- topic's subscribers in token order while the step's budget of (event, subscriber)
-- appends lasts. Subscribers beyond the budget are returned: the caller queues the
-- events for them with publish_more, in later calls, so no single script runs long.
-- USES batches jobs ingest
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
-- ARGV[6] budget: most (event, subscriber) pairs this step queues
-- ARGV[7..] events, three values each: type, url, packed event
-- Returns {status, events queued, subscriber left for later...}: status 1 ok, -1 the
-- topic belongs to another publisher, -2 the token is unknown (deleted before or while
-- the request ran): nothing written.
local prefix, topic, token = ARGV[1], ARGV[2], ARGV[3]
local now, default_ttl, budget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local FIRST = 7

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
local count = (#ARGV - FIRST + 1) / 3
redis.call('HINCRBY', KEYS[2], 'counter', count)
redis.call('HINCRBY', KEYS[4], 'events.published', count)

local pairs_ = redis.call('HGETALL', KEYS[3])
local routes, tokens = {}, {}
for i = 1, #pairs_, 2 do
  routes[pairs_[i]] = pairs_[i + 1]
  tokens[#tokens + 1] = pairs_[i]
end
table.sort(tokens)
local g = {KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}
local queued, coalesced, spent = 0, 0, 0
local reply = {1, 0}
for _, sub in ipairs(tokens) do
  if spent > 0 and spent + count > budget then
    reply[#reply + 1] = sub
  else
    local added, merged = ingest_subscriber(prefix, sub, routes[sub], FIRST, now,
      default_ttl, g)
    queued, coalesced, spent = queued + added, coalesced + merged, spent + count
  end
end
count_ingest(KEYS[4], queued, coalesced)
reply[2] = queued
return reply

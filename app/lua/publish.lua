-- The topic step of a publish, in the catalog: check the publisher's token, claim the
-- topic for its first publisher, count the events (once per publish id), and return the
-- topic's subscribers with their shard and route table, for the shard steps
-- (publish_queue.lua). On a single Redis, where every shard is on this node, it also
-- queues the events itself for as many subscribers as its budget of (event, subscriber)
-- appends allows, so a typical publish is one round trip; on a cluster the budget is 0.
-- USES batches jobs ingest
-- KEYS[1] topics set
-- KEYS[2] topic hash (publisher, counter)
-- KEYS[3] topic subscribers hash (token -> `<shard>|<route table>`)
-- KEYS[4] catalog counters hash
-- KEYS[5] tokens hash (the publisher's token is checked here, atomically with the write)
-- KEYS[6] the publish id's key (`P{c}:published:<id>`, the id scoped to its publisher
--         and topic), used when ARGV[7] is not ''
-- KEYS[7] the publisher's token bucket (`P{c}:rate:<token>`); a token added to a client
--         spends its client's (`P{c}:rate:<client key>`, derived here)
-- KEYS[8] aliases hash (an added token -> its client's key, which publishes; a key whose
--         own token was deleted -> '': unknown)
-- ARGV[1] key prefix (to name shards when queueing here: single Redis only)
-- ARGV[2] topic name
-- ARGV[3] publisher token, or SYSTEM_PUBLISHER for the bus's own events (not rated)
-- ARGV[4] now, ms
-- ARGV[5] default ttl, ms (0 = never expires)
-- ARGV[6] budget: most (event, subscriber) pairs queued here; 0 on a cluster
-- ARGV[7] publish id, or '' when none
-- ARGV[8] seconds a publish id is remembered
-- ARGV[9] the request's fingerprint (a digest of its body), kept with the publish id
-- ARGV[10] the publisher's rate, events a second (0: no limit)
-- ARGV[11] the bucket's size, events (BUSBAR_PUBLISH_BURST)
-- ARGV[12] the topic's filters version the events were matched against (0: none known;
--         lib/filters.lua)
-- ARGV[13..] events, five values each: type, url, ordering key ('' for the url), packed
--         event, the filters it matched (lib/ingest.lua's pick_route; '' for none)
-- Returns {status, events queued here, token, `<shard>|<table>`, ...} with the
-- subscribers left for the shard steps: status 1 ok, 2 ok and the publish id was seen
-- before (counted then), -1 the topic belongs to another publisher, -2 the token is
-- unknown (deleted before or while the request ran), -3 the publish id was seen with
-- another fingerprint (a reused Idempotency-Key), -4 the publisher is over its rate
-- ({-4, ms until the bucket holds these events}), -5 the topic's filters are at another
-- version than ARGV[12] ({-5, that version}: match again and retry): nothing written.
local prefix, topic, token = ARGV[1], ARGV[2], ARGV[3]
local now, default_ttl, budget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local FIRST = 13

-- the bus itself (SYSTEM_PUBLISHER, no client's token) publishes its operational events
local system = token == SYSTEM_PUBLISHER
local bucket_key = KEYS[7]
if not system then
  local client = redis.call('HGET', KEYS[8], token)
  if client == '' then return {-2, 0} end
  if client then  -- a token added to a client publishes as that client
    bucket_key = string.sub(KEYS[7], 1, #KEYS[7] - #token) .. client
    token = client
  end
  if redis.call('HEXISTS', KEYS[5], token) == 0 then return {-2, 0} end
end
local topic_ = redis.call('HMGET', KEYS[2], 'publisher', 'filters')
local publisher = topic_[1]
if publisher and publisher ~= token then
  return {-1, 0}
end
if (topic_[2] or '0') ~= ARGV[12] then
  return {-5, tonumber(topic_[2] or '0')}
end
local count = (#ARGV - FIRST + 1) / 5
local status = 1
local seen = ARGV[7] ~= '' and redis.call('GET', KEYS[6])
if seen and seen ~= ARGV[9] then
  return {-3, 0}
end
if seen then
  status = 2
else
  local rate, burst = tonumber(ARGV[10]), tonumber(ARGV[11])
  if rate > 0 and not system then  -- a token bucket: refilled at `rate`, spent by each new publish
    local bucket = redis.call('HMGET', bucket_key, 'level', 'at')
    local level = burst
    if bucket[1] then
      level = math.min(burst, tonumber(bucket[1]) + math.max(0, now - tonumber(bucket[2])) * rate / 1000)
    end
    if level < count then
      return {-4, math.ceil((count - level) * 1000 / rate)}
    end
    redis.call('HSET', bucket_key, 'level', tostring(level - count), 'at', now)
    redis.call('PEXPIRE', bucket_key, math.ceil((burst - level + count) * 1000 / rate) + 1000)
  end
  if ARGV[7] ~= '' then redis.call('SET', KEYS[6], ARGV[9], 'EX', tonumber(ARGV[8])) end
  if not publisher then
    redis.call('HSET', KEYS[2], 'publisher', token)
    redis.call('SADD', KEYS[1], topic)
  end
  redis.call('HINCRBY', KEYS[2], 'counter', count)
  redis.call('HINCRBY', KEYS[4], 'events.published', count)
end

local subscribers = redis.call('HGETALL', KEYS[3])
local routes, tokens, shards = {}, {}, {}
for i = 1, #subscribers, 2 do
  routes[subscribers[i]] = subscribers[i + 1]
  shards[subscribers[i]] = split_route(subscribers[i + 1])
  tokens[#tokens + 1] = subscribers[i]
end
-- in shard order, then token order: the shard steps go one shard after another
table.sort(tokens, function(a, b)
  if shards[a] ~= shards[b] then return shards[a] < shards[b] end
  return a < b
end)
-- a topic that never had content filters (version 0, checked above) matched none: no
-- event's fifth value to read
local matched = ARGV[12] == '0' and {} or read_matched(FIRST)
local reply = {status, 0}
local spent, totals = 0, {}
for _, sub in ipairs(tokens) do
  if budget == 0 or (spent > 0 and spent + count > budget) then
    reply[#reply + 1] = sub
    reply[#reply + 1] = routes[sub]
  else
    local shard, table_ = split_route(routes[sub])
    local sb = prefix .. '{s:' .. shard .. '}:'
    local jobs = {sb .. 'jobs:index:main', sb .. 'jobs:scheduled:main', sb .. 'jobs:instant:main'}
    local added, merged, filtered = ingest_subscriber(sb, sub, table_, FIRST, now, default_ttl,
      jobs, matched)
    local t = totals[sb] or {0, 0, 0}
    totals[sb] = {t[1] + added, t[2] + merged, t[3] + filtered}
    reply[2] = reply[2] + added
    spent = spent + count
  end
end
for sb, t in pairs(totals) do count_ingest(sb .. 'counters', t[1], t[2], t[3]) end
return reply

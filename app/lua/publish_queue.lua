-- One shard's step of a publish (see publish.lua): queue the events for the named
-- subscribers of this shard, with the route tables the topic step read. A step that
-- carries a publish id runs once: a retry of it (busbar's own, after a lost reply or a
-- failover, or the publisher's, with the same Idempotency-Key) queues nothing twice.
-- USES batches jobs ingest
-- KEYS[1] the shard's counters hash
-- KEYS[2] the shard's jobs index set of queue main
-- KEYS[3] the shard's jobs scheduled sorted set of queue main
-- KEYS[4] the shard's jobs instant list of queue main
-- KEYS[5] this step's publish key (`P{s:N}:published:<id>:<first token>`), used when
--         ARGV[4] is not ''
-- ARGV[1] the shard's key base (`P{s:N}:`)
-- ARGV[2] now, ms
-- ARGV[3] default ttl, ms (0 = never expires)
-- ARGV[4] publish id, or '' when none
-- ARGV[5] seconds a publish id is remembered
-- ARGV[6] n, the number of subscribers named
-- ARGV[7..6+2n] token, `<shard>|<route table>`, for each subscriber
-- ARGV[7+2n..] events, five values each: type, url, ordering key ('' for the url),
--              packed event, the filters it matched (as publish.lua's)
-- Returns the number of events queued, or -1 when this step had run already.
local sb, now, default_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[4] ~= '' and not redis.call('SET', KEYS[5], 1, 'NX', 'EX', tonumber(ARGV[5])) then
  return -1
end
local n = tonumber(ARGV[6])
local jobs = {KEYS[2], KEYS[3], KEYS[4]}
local queued, coalesced, filtered = 0, 0, 0
local matched = read_matched(7 + 2 * n)
for i = 7, 6 + 2 * n, 2 do
  local _, table_ = split_route(ARGV[i + 1])
  local added, merged, dropped = ingest_subscriber(sb, ARGV[i], table_, 7 + 2 * n, now,
    default_ttl, jobs, matched)
  queued, coalesced, filtered = queued + added, coalesced + merged, filtered + dropped
end
count_ingest(KEYS[1], queued, coalesced, filtered)
return queued

-- Start one subscriber's next delivery, run by its delivery job: pick the next due batch
-- by (lane, age), drop its expired events, mark it in flight with the caller's nonce and
-- return it; or settle the job when the subscriber is in backoff, has nothing due, or is
-- gone. A worker that no longer holds the job (scrubbed while paused) changes nothing.
-- USES batches jobs delivery
-- KEYS[1..10] as in lib/delivery.lua: subscriber, the shard's event gauge, batch gauge
-- and counters, KEYS[5..7] its jobs index, scheduled, instant of queue main, KEYS[8] the
-- worker's pending list, KEYS[9] dead letters, KEYS[10] the shard's delivery log
-- ARGV[1] the shard's key base, ARGV[2] token, ARGV[3] now (ms), ARGV[4] the job
-- ARGV[5] nonce: identifies this delivery to its ack or fail
-- ARGV[6] a fresh salt: the signing secret of a subscriber from before secrets existed
-- Returns {'deliver', lane, id, created_at, attempts, callback, uuid, client name (for
-- logs, never the token), {entry...}, event_ids ('1' or ''), {salt of each secret that
-- signs now: the current one, and the previous one during its grace}},
-- {'wait', due}, {'idle'}, {'gone'} or {'lost'}.
if not job_held(KEYS[8], job) then return {'lost'} end
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'next_attempt_at',
  'callback', 'uuid', 'event_ids', 'secret_salt', 'previous_salt', 'previous_until')
if not meta[1] then
  settle(nil)
  return {'gone'}
end
local max_events, timeout = tonumber(meta[1]), tonumber(meta[2])
local not_before = tonumber(meta[3] or '0')
if not_before > now then
  return {'wait', settle_from_queue(not_before)}
end
local lane = 0
while lane <= LANES do
  local id = redis.call('LINDEX', base .. 'lane:' .. lane, 0)
  local key = id and base .. 'batch:' .. id
  local ready = false
  if id then
    if id ~= redis.call('GET', base .. 'current:' .. lane) then
      ready = true
    elseif redis.call('LLEN', key) - 3 >= max_events
        or tonumber(redis.call('LINDEX', key, 1)) + timeout <= now then
      redis.call('DEL', base .. 'current:' .. lane)
      ready = true
    end
  end
  if ready then
    local batch = redis.call('LRANGE', key, 0, -1)
    local live, expired = {}, 0
    for i = 4, #batch do
      if entry_expired(batch[i], now) then
        expired = expired + 1
      else
        live[#live + 1] = batch[i]
      end
    end
    if expired > 0 then
      count_dropped(s, 'expired', expired)
      redis.call('HINCRBY', KEYS[2], token, -expired)
    end
    if #live == 0 then
      -- nothing left to send: no HTTP call; look again
      batch_remove(s, lane, id, 0)
    else
      if expired > 0 then batch_rewrite(s, id, batch, live) end
      redis.call('HSET', KEYS[1], 'inflight', id, 'nonce', ARGV[5], 'last_attempted_at', now)
      redis.call('HSETNX', base .. 'first_attempt', id, now)
      if not meta[7] then
        meta[7] = ARGV[6]
        redis.call('HSET', KEYS[1], 'secret_salt', meta[7])
      end
      local salts = {meta[7]}
      if meta[8] and tonumber(meta[9] or '0') > now then salts[2] = meta[8] end
      return {'deliver', lane, id, tonumber(batch[2]), tonumber(batch[3]), meta[4], meta[5],
        redis.call('HGET', KEYS[1], 'name') or '(deleted client)', live,
        meta[6] == '1' and '1' or '', salts}
    end
  else
    lane = lane + 1
  end
end
local due = settle(next_due(max_events, timeout))
if due == -1 then return {'idle'} end
return {'wait', due}

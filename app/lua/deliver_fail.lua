-- The callback failed (status, timeout, connection error): count the attempt, damage
-- health, back off; after max_attempts move the batch's events to the dead letters;
-- settle the job. Fenced like deliver_ack: only the delivery in flight may fail it.
-- Or the callback asked to wait (429 or 503 with Retry-After, ARGV[11]): no attempt
-- counted, no health lost; the batch stays at the head of its lane until then.
-- USES batches jobs delivery
-- KEYS[1..10] as lib/delivery.lua lists them: subscriber, the shard's event gauge, batch gauge
-- and counters, KEYS[5..7] its jobs index, scheduled, instant of queue main, KEYS[8] the
-- worker's pending list, KEYS[9] dead letters, KEYS[10] the shard's delivery log
-- ARGV[1] the shard's key base, ARGV[2] token, ARGV[3] now (ms), ARGV[4] the job
-- ARGV[5] batch id, ARGV[6] nonce given to begin
-- ARGV[7] health points added (BUSBAR_HP_DAMAGE_RATE, negative)
-- ARGV[8] backoff at 0 health points, ms, already jittered
-- ARGV[9] what the callback answered: a status code or an error name
-- ARGV[10] most dead letters kept
-- ARGV[11] the wait a 429/503 asked for, ms, or '' for a failure
-- Returns {'done', next due}, or what lib/delivery.lua's fence answers.
local d = delivery_ctx(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], KEYS)
local s, now, id = d.s, d.now, ARGV[5]
local refused = fence(d, id, ARGV[6])
if refused then return refused end
local wait = tonumber(ARGV[11])
if wait then
  local until_ms = now + wait
  redis.call('HSET', KEYS[1], 'next_attempt_at', until_ms)
  redis.call('HINCRBY', KEYS[4], 'delivery.deferred', 1)
  return {'done', settle_from_queue(d, until_ms)}
end
local key = d.base .. 'batch:' .. id
local lane = tonumber(redis.call('LINDEX', key, BATCH_LANE))
local count = redis.call('LLEN', key) - BATCH_HEADER
local attempts = tonumber(redis.call('LINDEX', key, BATCH_ATTEMPTS)) + 1
local hp = health(d, tonumber(ARGV[7]))
local not_before = now + math.floor(tonumber(ARGV[8]) * math.pow(2, -hp / 10))
redis.call('HSET', KEYS[1], 'health_points', hp, 'next_attempt_at', not_before)
redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('HINCRBY', KEYS[4], 'delivery.failures', 1)
local max_attempts = tonumber(redis.call('HGET', KEYS[1], 'max_attempts') or '0')
if max_attempts > 0 and attempts >= max_attempts then
  local letters = redis.call('LRANGE', key, 3, -1)
  local head = string.format('%d|%d|%d|', attempts, now, lane) .. ARGV[9] .. '|'
  for i = 1, #letters do letters[i] = head .. letters[i] end
  for i = 1, #letters, 1000 do  -- unpack() has a limit below the largest batch
    redis.call('RPUSH', KEYS[9], unpack(letters, i, math.min(i + 999, #letters)))
  end
  local over = redis.call('LLEN', KEYS[9]) - tonumber(ARGV[10])
  if over > 0 then
    redis.call('LTRIM', KEYS[9], over, -1)
    redis.call('HINCRBY', KEYS[4], 'deadletters.trimmed', over)
  end
  redis.call('HINCRBY', KEYS[4], 'events.deadlettered', count)
  batch_remove(s, lane, id, count)
  -- a dead batch frees the lane: the next one goes out after the backoff
else
  redis.call('LSET', key, 2, attempts)
end
return {'done', settle_from_queue(d, not_before)}

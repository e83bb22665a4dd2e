-- The callback answered 2xx: delete the batch, log it, count, heal, close the circuit
-- (the failures in a row start again from none: the subscriber's, and its partition's
-- when it has several, lib/partitions.lua), settle the job. Only
-- the delivery in flight may do this (batch id and the nonce drawn at begin), and only
-- while its worker holds the job: an old answer never acknowledges a newer batch.
-- An operational event (lib/operations.lua) tells when the circuit closes.
-- USES batches jobs delivery operations shaping
-- KEYS[1..11] as lib/delivery.lua lists them: subscriber, the shard's event gauge, batch gauge
-- and counters, KEYS[5..7] its jobs index, scheduled, instant of queue main, KEYS[8] the
-- worker's pending list, KEYS[9] dead letters, KEYS[10] the shard's delivery log,
-- KEYS[11] the shard's attempt stream
-- ARGV[1] the shard's key base, ARGV[2] the partition's pid (the subscriber's token at
--   concurrency 1; lib/partitions.lua), ARGV[3] now (ms), ARGV[4] the job
-- ARGV[5] batch id, ARGV[6] nonce given to begin
-- ARGV[7] health points gained (BUSBAR_HP_HEAL_RATE)
-- ARGV[8] time the HTTP call took, ms
-- ARGV[9] approximate MAXLEN of the delivery log, 0 when it is off
-- ARGV[10] a nonce for a delivery begun in this same step (with ARGV[12] or a sweep), or ''
-- ARGV[11] a fresh salt, as for deliver_begin (with ARGV[10])
-- ARGV[12] '1' to go on with the subscriber's next due batch at once: the job stays
--          with this worker and the next delivery begins here (one round trip a batch
--          instead of three while a subscriber has more due); '' not to
-- ARGV[13] the worker (`<process>/<slot>`), for the sweep and the attempt log
-- ARGV[14] the status the callback answered (a 2xx code)
-- ARGV[15] attempts kept in the subscriber's attempt log (BUSBAR_ATTEMPT_LOG), 0 = none
-- ARGV[16] the oldest attempt kept there, ms (now less BUSBAR_ATTEMPT_LOG_AGE_S)
-- ARGV[17] the first bytes of the answer's body
-- ARGV[18] the shard attempt stream's approximate MAXLEN (BUSBAR_ATTEMPT_STREAM_MAXLEN), 0 = off
-- ARGV[19] what the routes' transforms made of the batch (app/delivery/shaping.py),
--          msgpack [sent, source, dropped, failed, version, max dead, deferred], or ''
--          when none ran (lib/shaping.lua): the entries sent (data transformed) in batch
--          order, the originals of those when any was transformed (else empty), the
--          places (from 1) of those that gave nothing and {place, status} of those that
--          failed, both out of the batch in this step; the version of the transforms,
--          for the attempt log; the most dead letters kept; how many of the batch's last
--          events its transforms had no time for (BUSBAR_TRANSFORM_BATCH_MS): they stay
--          in it.
-- ARGV[20] the attempt's outcome class, as the attempt log's filter names it
--          (app/models/attempt_result.py), or '' when no request was made: the batch
--          had nothing left to send (ARGV[14] `none_sent`): no attempt, no latency,
--          nothing of the endpoint's health
-- KEYS[12..] and ARGV[21..]: when given, a sweep as deliver_take's (its KEYS, and the
--          key base of each shard) for when this job is done: the worker's next job is
--          taken and its delivery begun in this same step, instead of in one more
-- Returns {'done', next due or -1} ({'done', due, <what deliver_take returns>} when the
-- sweep took a job), or {'next', <what deliver_begin returns>} when going on, or what
-- lib/delivery.lua's fence answers.
local d = delivery_ctx(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], KEYS)
local s, now, id = d.s, d.now, ARGV[5]
local refused = fence(d, id, ARGV[6])
if refused then return refused end
local shaped = ARGV[19] ~= '' and cmsgpack.unpack(ARGV[19]) or nil
if shaped then shape_batch(d, KEYS, id, shaped, now) end  -- what is left was sent
local key = d.base .. 'batch:' .. id
local header = redis.call('LRANGE', key, 0, BATCH_HEADER - 1)
local lane, created = tonumber(header[BATCH_LANE + 1]), tonumber(header[BATCH_CREATED + 1])
local attempt = tonumber(header[BATCH_ATTEMPTS + 1]) + 1
local count = redis.call('LLEN', key) - BATCH_HEADER
local deferred = shaped and tonumber(shaped[7] or 0) or 0
local sent = count - deferred
local requested = ARGV[20] ~= ''
if requested then  -- no request: no attempt, no latency
  record_attempt(d, attempt_bounds(ARGV[15], ARGV[16], ARGV[18]), {batch = id, events = sent,
    lane = lane, attempt = attempt, worker = ARGV[13], took = ARGV[8],
    status = ARGV[14], outcome = ARGV[20], body = ARGV[17], transform = shaped and shaped[5]})
  local latency = math.max(0, now - created)
  redis.call('HINCRBY', KEYS[4], 'latency.batches_ms', latency)
  -- histogram of batch latency: the smallest power of two >= it, up to about 17 minutes
  local le = 1
  while le < latency and le <= 1048576 do le = le * 2 end
  redis.call('HINCRBY', KEYS[4], 'latency.le.' .. (le > 1048576 and 'inf' or le), 1)
end
local maxlen = tonumber(ARGV[9])
if maxlen > 0 then
  -- logged in the step that deletes the batch: never logged without being
  -- acknowledged, never acknowledged without being logged
  -- what was sent; and, for events a transform changed, what was queued (`source`:
  -- what a replay from the lake queues again, docs/transforms.md)
  local fields = {'subscriber', redis.call('HGET', KEYS[1], 'name') or '(deleted client)',
    'priority', lane, 'batch_id', id, 'created_at', created,
    'first_attempt_at', redis.call('HGET', d.base .. 'first_attempt', id) or now,
    'delivered_at', now, 'attempts', attempt}
  local n = #fields
  if not shaped then
    local events = redis.call('LRANGE', key, BATCH_HEADER, -1)
    fields[n + 1], fields[n + 2] = 'events', cmsgpack.pack(events)
  elseif sent > 0 then
    fields[n + 1], fields[n + 2] = 'events', cmsgpack.pack(shaped[1])
    if #shaped[2] > 0 then fields[n + 3], fields[n + 4] = 'source', cmsgpack.pack(shaped[2]) end
  end
  -- a batch whose transforms left nothing to send was not delivered: not logged
  if #fields > n then redis.call('XADD', KEYS[10], 'MAXLEN', '~', maxlen, '*', unpack(fields)) end
end
if deferred > 0 then
  -- the events its transforms had no time for (BUSBAR_TRANSFORM_BATCH_MS), the last of
  -- it, stay in the batch, due at once for the next delivery
  local batch = redis.call('LRANGE', key, 0, -1)
  batch_rewrite(s, id, batch, {unpack(batch, #batch - deferred + 1, #batch)})
  redis.call('HINCRBY', s.events, s.token, -sent)
else
  batch_remove(s, lane, id, count)
end
-- read before the circuit closes: meta[4] is when it opened, if it was open
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'paused_at', 'circuit_at')
-- no request made (the transforms left nothing to send): the endpoint's health, backoff
-- and circuit are as they were, this told nothing of it
if requested then
  redis.call('HINCRBY', KEYS[4], 'delivery.batches', 1)
  redis.call('HINCRBY', KEYS[4], 'delivery.events', sent)
  redis.call('HINCRBY', KEYS[4], 'delivery.time_ms', tonumber(ARGV[8]))
  redis.call('HINCRBY', KEYS[1], 'sent', sent)
  redis.call('HSET', KEYS[1], 'health_points', health(d, tonumber(ARGV[7])),
    'next_attempt_at', 0, 'ok_at', now)
  if d.part then  -- a partition: its own backoff and failures in a row end too
    redis.call('HSET', d.f, 'next_attempt_at', 0)
    redis.call('HDEL', d.f, 'streak')
  end
  redis.call('HDEL', KEYS[1], 'streak', 'streak_at')
  if redis.call('HDEL', KEYS[1], 'circuit_at') == 1 then
    redis.call('HINCRBY', KEYS[4], 'circuit.closed', 1)  -- the probe went through
    note_operation(s.shard, KEYS[1], 'subscriber.circuit_closed',
      {open_ms = math.max(0, now - tonumber(meta[4]))})
    if d.part and meta[1] and not meta[3] then
      -- the other partitions waited for this probe (lib/delivery.lua): due again, their
      -- own backoff from the outage ended with it
      for _, pid in ipairs(partitions_of(s.shard, s.token)) do
        local part = sub_ctx(s.shard, pid)
        local job = redis.call('HGET', part.flight, 'job')
        if pid ~= s.pid and job then
          redis.call('HSET', part.flight, 'next_attempt_at', 0)
          local at = queue_due(part, now, tonumber(meta[1]), tonumber(meta[2]))
          if at then job_due_by(KEYS[5], KEYS[6], KEYS[7], job, at, now) end
        end
      end
    end
  end
end
local due = nil  -- when the subscriber is gone (deleted meanwhile) or paused, nothing is due
if meta[1] and not meta[3] then due = next_due(d, tonumber(meta[1]), tonumber(meta[2])) end
local reply
if ARGV[12] == '1' and due == now then
  local begun = begin_delivery(d, ARGV[10], ARGV[11])
  -- a partition that went to wait in line for a place (lib/places.lua) has woken the
  -- one ahead of it: the sweep below may take that one, in this same step
  if begun[1] ~= 'idle' or #KEYS <= 11 then return {'next', begun} end
  reply = {'done', -1}
else
  reply = {'done', settle(d, due)}
end
if #KEYS > 11 then
  local taken = sweep_and_begin(KEYS, 12, {unpack(ARGV, 21)}, ARGV[13], now, ARGV[10],
    ARGV[11])
  if taken then reply[3], reply[4], reply[5], reply[6] = taken[1], taken[2], taken[3], taken[4] end
end
return reply

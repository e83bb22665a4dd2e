-- The callback answered 2xx (a broker confirmed every message): delete the batch, and
-- those gathered into a broker flight with it (lib/delivery.lua), log it, count, heal,
-- close the circuit (the failures in a row start again from none: the subscriber's, and
-- its partition's when it has several, lib/partitions.lua), settle the job. Only
-- the delivery in flight may do this (batch id and the nonce drawn at begin), and only
-- while its worker holds the job: an old answer never acknowledges a newer batch.
-- An operational event (lib/operations.lua) tells when the circuit closes.
-- USES batches jobs delivery operations acks shaping
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
-- ARGV[21] how many of the batches gathered into a broker flight after its first
--          (lib/delivery.lua's gather) the broker confirmed: acknowledged with it; a
--          flight that stopped early (app/delivery/destinations.py's Stop) leaves the
--          rest queued, untried
-- KEYS[12..] and ARGV[22..]: when given, a sweep as deliver_take's (its KEYS, and the
--          key base of each shard) for when this job is done: the worker's next job is
--          taken and its delivery begun in this same step, instead of in one more
-- Returns {'done', next due or -1} ({'done', due, <what deliver_take returns>} when the
-- sweep took a job), or {'next', <what deliver_begin returns>} when going on, or what
-- lib/delivery.lua's fence answers.
local d = delivery_ctx(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], KEYS)
local now, id = d.now, ARGV[5]
local refused = fence(d, id, ARGV[6])
if refused then return refused end
local shaped = ARGV[19] ~= '' and cmsgpack.unpack(ARGV[19]) or nil
if shaped then shape_batch(d, KEYS, id, shaped, now) end  -- what is left was sent
local a = {took = ARGV[8], status = ARGV[14], outcome = ARGV[20], body = ARGV[17],
  worker = ARGV[13], log = attempt_bounds(ARGV[15], ARGV[16], ARGV[18]),
  maxlen = tonumber(ARGV[9]), time = true}
ack_batch(d, id, a, shaped)
-- a broker flight's other batches (lib/delivery.lua's gather): the broker confirmed each
a.time = false
ack_gathered(d, a, tonumber(ARGV[21]))
-- read before the circuit closes: meta[4] is when it opened, if it was open
local meta = redis.call('HMGET', KEYS[1], 'max_events', 'timeout', 'paused_at', 'circuit_at')
-- no request made (the transforms left nothing to send): the endpoint's health, backoff
-- and circuit are as they were, this told nothing of it
if ARGV[20] ~= '' then ack_heal(d, tonumber(ARGV[7]), meta) end
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
  local taken = sweep_and_begin(KEYS, 12, {unpack(ARGV, 22)}, ARGV[13], now, ARGV[10],
    ARGV[11])
  if taken then reply[3], reply[4], reply[5], reply[6] = taken[1], taken[2], taken[3], taken[4] end
end
return reply

-- Shared by deliver_ack and deliver_fail: a batch the endpoint (or the broker) took,
-- acknowledged. deliver_ack acknowledges its flight's batches with them; deliver_fail
-- acknowledges those of a broker flight that the broker confirmed before the one that
-- failed (lib/delivery.lua's gather), then fails that one.

-- Batch `id` of delivery `d` acknowledged: its attempt recorded (when a request was made:
-- `a.outcome` not ''), its latency counted, logged to the delivery log (`a.maxlen` > 0)
-- in the step that deletes it, and removed, or, for the events its transforms had no
-- time for, rewritten to hold them (`shaped`, what they made of it, lib/shaping.lua; nil
-- when none ran). `a`: took (ms), status, outcome, body, worker, log (attempt_bounds),
-- maxlen, time (true to add `took` to the shard's delivery time: once a flight).
-- Returns the events it sent (0 when none was requested).
local function ack_batch(d, id, a, shaped)
  local keys, now = d.k, d.now
  local key = d.base .. 'batch:' .. id
  local header = redis.call('LRANGE', key, 0, BATCH_HEADER - 1)
  local lane, created = tonumber(header[BATCH_LANE + 1]), tonumber(header[BATCH_CREATED + 1])
  local attempt = tonumber(header[BATCH_ATTEMPTS + 1]) + 1
  local count = redis.call('LLEN', key) - BATCH_HEADER
  local deferred = shaped and tonumber(shaped[7] or 0) or 0
  local sent = count - deferred
  local requested = a.outcome ~= ''
  if requested then  -- no request: no attempt, no latency
    record_attempt(d, a.log, {batch = id, events = sent, lane = lane, attempt = attempt,
      worker = a.worker, took = a.took, status = a.status, outcome = a.outcome,
      body = a.body, transform = shaped and shaped[5]})
    local latency = math.max(0, now - created)
    redis.call('HINCRBY', keys[4], 'latency.batches_ms', latency)
    -- histogram of batch latency: the smallest power of two >= it, up to about 17 minutes
    local le = 1
    while le < latency and le <= 1048576 do le = le * 2 end
    redis.call('HINCRBY', keys[4], 'latency.le.' .. (le > 1048576 and 'inf' or le), 1)
  end
  if a.maxlen > 0 then
    -- logged in the step that deletes the batch: never logged without being
    -- acknowledged, never acknowledged without being logged
    -- what was sent; and, for events a transform changed, what was queued (`source`:
    -- what a replay from the lake queues again, docs/transforms.md)
    local fields = {'subscriber', redis.call('HGET', keys[1], 'name') or '(deleted client)',
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
    if #fields > n then
      redis.call('XADD', keys[10], 'MAXLEN', '~', a.maxlen, '*', unpack(fields))
    end
  end
  if deferred > 0 then
    -- the events its transforms had no time for (BUSBAR_TRANSFORM_BATCH_MS), the last of
    -- it, stay in the batch, due at once for the next delivery
    local batch = redis.call('LRANGE', key, 0, -1)
    batch_rewrite(d.s, id, batch, {unpack(batch, #batch - deferred + 1, #batch)})
    redis.call('HINCRBY', d.s.events, d.s.token, -sent)
  else
    batch_remove(d.s, lane, id, count)
  end
  if not requested then return 0 end
  redis.call('HINCRBY', keys[4], 'delivery.batches', 1)
  redis.call('HINCRBY', keys[4], 'delivery.events', sent)
  if a.time then redis.call('HINCRBY', keys[4], 'delivery.time_ms', tonumber(a.took)) end
  redis.call('HINCRBY', keys[1], 'sent', sent)
  return sent
end

-- The endpoint answered (a request acknowledged): health gained (`heal` points), the
-- backoff and the failures in a row over, the subscriber's and, in a partition, its own
-- (lib/partitions.lua); the circuit closed if it was open, told as an operational event,
-- and the other partitions, which waited for this probe, due again. `meta`: the
-- subscriber's max_events, timeout, paused_at and circuit_at, read before.
local function ack_heal(d, heal, meta)
  local keys, now, s = d.k, d.now, d.s
  redis.call('HSET', keys[1], 'health_points', health(d, heal), 'next_attempt_at', 0,
    'ok_at', now)
  if d.part then  -- a partition: its own backoff and failures in a row end too
    redis.call('HSET', d.f, 'next_attempt_at', 0)
    redis.call('HDEL', d.f, 'streak')
  end
  redis.call('HDEL', keys[1], 'streak', 'streak_at')
  if redis.call('HDEL', keys[1], 'circuit_at') == 0 then return end
  redis.call('HINCRBY', keys[4], 'circuit.closed', 1)  -- the probe went through
  note_operation(s.shard, keys[1], 'subscriber.circuit_closed',
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
        if at then job_due_by(keys[5], keys[6], keys[7], job, at, now) end
      end
    end
  end
end

-- The batches of d.more (gathered into a broker flight after its first) from the
-- first, `count` of them (all when nil), acknowledged as ack_batch acknowledges one:
-- each confirmed by the broker in that flight. Returns the events they sent.
local function ack_gathered(d, a, count)
  local sent = 0
  for i = 1, math.min(count or #d.more, #d.more) do
    if redis.call('EXISTS', d.base .. 'batch:' .. d.more[i]) == 1 then
      sent = sent + ack_batch(d, d.more[i], a, nil)
    end
  end
  return sent
end

-- Shared by the two scripts that settle a delivery (deliver_ack, deliver_fail): what the
-- routes' transforms decided for the batch in flight (app/delivery/shaping.py) holds
-- whatever the callback answered. Prepended to a script whose header says `-- USES shaping`.

-- `shaped` (msgpack, as codec.pack_shaped makes it): {sent, source, dropped, failed,
-- version, max dead, deferred}; `dropped` the places in the batch (from 1) of the events their
-- transform gave nothing for, `failed` {place, status} of those whose transform failed.
-- Both leave batch `id` of subscriber or partition `d` in this step: the dropped are
-- counted (`transformed_out`), the failed go to the dead letters (keys[9]) alone, as
-- queued, with their status (`transform_failed <bound>`), the list trimmed to `max dead`,
-- and an operational event tells it. What stays is what was sent, in its order.
local function shape_batch(d, keys, id, shaped, now)
  local dropped, failed = shaped[3], shaped[4]
  if #dropped == 0 and #failed == 0 then return end
  local key = d.base .. 'batch:' .. id
  local batch = redis.call('LRANGE', key, 0, -1)
  local gone = {}
  for _, place in ipairs(dropped) do gone[place] = true end
  if #failed > 0 then
    local lane, attempts = tonumber(batch[BATCH_LANE + 1]), tonumber(batch[BATCH_ATTEMPTS + 1]) + 1
    local letters, bounds = {}, {}
    for _, f in ipairs(failed) do
      gone[f[1]] = true
      letters[#letters + 1] = string.format('%d|%d|%d|', attempts, now, lane) .. f[2] .. '|'
        .. batch[BATCH_HEADER + f[1]]
      bounds[#bounds + 1] = string.match(f[2], ' (.*)$')
    end
    dead_letters_push(keys, letters, tonumber(shaped[6]))
    redis.call('HINCRBY', keys[4], 'events.transform_failed', #letters)
    note_operation(d.s.shard, keys[1], 'subscriber.transform_failed',
      {events = #letters, batch = tonumber(id), bounds = bounds})
  end
  count_dropped(d.s, 'transformed_out', #dropped)
  local live = {}
  for i = BATCH_HEADER + 1, #batch do
    if not gone[i - BATCH_HEADER] then live[#live + 1] = batch[i] end
  end
  batch_rewrite(d.s, id, batch, live)
  redis.call('HINCRBY', keys[2], d.token, -(#dropped + #failed))
end

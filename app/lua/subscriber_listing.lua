-- What GET /subscriptions lists of some subscribers of one shard (app/models/subscribers.py's
-- describe): each one's hash, routes, queued events, queue by lane, dead letters and
-- deliveries in flight, in one call for many. As pipelined commands (some 27 a subscriber
-- at concurrency 1, 12 more a partition) the listing cost a web process 0.3 ms of CPU a
-- subscriber: 3 s a call beside 10,000 (docs/performance.md). Reads only.
-- A subscriber's batches are walked up to a bound (ARGV 2), over all its partitions and
-- lanes in order: past it, a lane list is only counted (LLEN) and its events estimated
-- at the mean of the batches walked, so one call stays short whatever the backlogs
-- (docs/api.md, GET /subscriptions).
-- A call stops after the subscriber with which it has made more than ARGV 3 Redis calls
-- (a subscriber at concurrency 256 has 1,025 partitions of 11 lanes): the caller asks
-- again for those left, and every call stays a few ms whatever the subscribers.
-- USES partitions
-- KEYS[1] the shard's event gauge (each subscriber's queued events, by token)
-- ARGV[1] the shard's key base
-- ARGV[2] how many batches of a subscriber are walked at most
-- ARGV[3] how many Redis calls a call makes before it stops after a subscriber
-- ARGV[4..] the subscribers' tokens, all of this shard
-- Returns, per token in order, up to where it stopped (at least one): {} when it has no subscriber hash, else {its hash (HGETALL),
-- its routes (HGETALL), queued events, dead letters, deliveries in flight, the creation
-- time of its oldest lane head (0: nothing queued), lanes}, lanes flat in lane order, for
-- those holding batches: lane, batches, events, the creation time of its oldest batch
-- (of a list not walked, its head's), 1 when the events are estimated (a list not walked
-- to its end) else 0.
local walk, budget = tonumber(ARGV[2]), tonumber(ARGV[3])
local made = 0
local function call(...)
  made = made + 1
  return redis.call(...)
end
local out = {}
for i = 4, #ARGV do
  if made > budget then break end
  local token = ARGV[i]
  local s = sub_ctx(ARGV[1], token)
  local fields = call('HGETALL', s.sub)
  if #fields == 0 then
    out[#out + 1] = {}
  else
    -- per lane: batches, events, oldest, estimated; `left` batches may still be walked,
    -- `unwalked` (lane, batches) are those counted only, estimated once the walk is done
    local lanes, flying, head, left, seen, total, unwalked = {}, 0, 0, walk, 0, 0, {}
    local queued = tonumber(call('HGET', KEYS[1], token) or '0')
    for _, pid in ipairs(partitions_of(ARGV[1], token)) do
      local p = sub_ctx(ARGV[1], pid)
      flying = flying + call('HEXISTS', p.flight, 'inflight')
      -- nothing queued (the gauge Expire trusts too): no lane to read
      for lane = 0, queued > 0 and LAST_LANE or -1 do
        local list = p.q .. 'lane:' .. lane
        local asked, l = left, lanes[lane] or {0, 0, 0, 0}
        local ids = asked > 0 and call('LRANGE', list, 0, asked - 1) or {}
        local first = ids[1] or (asked == 0 and call('LINDEX', list, 0)) or nil
        if first then  -- the head: the oldest batch of a list not walked
          local created = tonumber(call('LINDEX', s.base .. 'batch:' .. first, BATCH_CREATED))
          if created and (l[3] == 0 or created < l[3]) then l[3] = created end
          if created and (head == 0 or created < head) then head = created end
        end
        for _, id in ipairs(ids) do  -- a batch requeued at the tail may be older
          local key = s.base .. 'batch:' .. id
          local created = tonumber(call('LINDEX', key, BATCH_CREATED))
          if created then
            local events = math.max(0, call('LLEN', key) - BATCH_HEADER)
            l[1], l[2], seen, total = l[1] + 1, l[2] + events, seen + 1, total + events
            if l[3] == 0 or created < l[3] then l[3] = created end
          end
        end
        left = left - #ids
        local more = 0
        if first and #ids == asked then more = call('LLEN', list) - #ids end
        if more > 0 then
          l[1], l[4] = l[1] + more, 1
          unwalked[#unwalked + 1] = {lane, more}
        end
        if l[1] > 0 then lanes[lane] = l end
      end
    end
    local mean = seen > 0 and total / seen or 1
    for _, u in ipairs(unwalked) do
      lanes[u[1]][2] = lanes[u[1]][2] + math.floor(u[2] * mean + 0.5)
    end
    local flat = {}
    for lane = 0, LAST_LANE do
      local l = lanes[lane]
      if l then
        flat[#flat + 1] = lane
        for _, v in ipairs(l) do flat[#flat + 1] = v end
      end
    end
    out[#out + 1] = {fields, call('HGETALL', s.base .. 'routes'), queued,
      call('LLEN', s.base .. 'deadletters'), flying, head, flat}
  end
end
return out

-- What GET /subscriptions lists of some subscribers of one shard (app/models/subscribers.py's
-- describe): each one's hash, routes, queued events, queue by lane, dead letters and
-- deliveries in flight, in one call for many. As pipelined commands (some 27 a subscriber
-- at concurrency 1, 12 more a partition) the listing cost a web process 0.3 ms of CPU a
-- subscriber: 3 s a call beside 10,000 (docs/performance.md). Reads only.
-- Each lane list of a partition is walked up to a bound (ARGV 2) of batches: past it,
-- its batches are counted (LLEN) and its events estimated from the ones walked, so one
-- call stays short whatever a backlog holds (docs/api.md, GET /subscriptions).
-- USES partitions
-- KEYS[1] the shard's event gauge (each subscriber's queued events, by token)
-- ARGV[1] the shard's key base
-- ARGV[2] how many batches of a lane list are walked at most
-- ARGV[3..] the subscribers' tokens, all of this shard
-- Returns, per token in order: {} when it has no subscriber hash, else {its hash (HGETALL),
-- its routes (HGETALL), queued events, dead letters, deliveries in flight, the creation
-- time of its oldest lane head (0: nothing queued), lanes}, lanes flat in lane order, for
-- those holding batches: lane, batches, events, the oldest batch's creation time, 1 when
-- the events are estimated (a list walked part way) else 0.
local walk = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local token = ARGV[i]
  local s = sub_ctx(ARGV[1], token)
  local fields = redis.call('HGETALL', s.sub)
  if #fields == 0 then
    out[#out + 1] = {}
  else
    local lanes, flying, head = {}, 0, 0
    for _, pid in ipairs(partitions_of(ARGV[1], token)) do
      local p = sub_ctx(ARGV[1], pid)
      flying = flying + redis.call('HEXISTS', p.flight, 'inflight')
      for lane = 0, LAST_LANE do
        local list = p.q .. 'lane:' .. lane
        local ids = redis.call('LRANGE', list, 0, walk - 1)
        if #ids > 0 then
          local l = lanes[lane] or {0, 0, 0, 0}  -- batches, events, oldest, estimated
          local walked, events = 0, 0
          for n, id in ipairs(ids) do
            local key = s.base .. 'batch:' .. id
            local created = tonumber(redis.call('LINDEX', key, BATCH_CREATED))
            if created then
              walked = walked + 1
              events = events + math.max(0, redis.call('LLEN', key) - BATCH_HEADER)
              if l[3] == 0 or created < l[3] then l[3] = created end
              if n == 1 and (head == 0 or created < head) then head = created end
            end
          end
          local more = #ids == walk and redis.call('LLEN', list) - walk or 0
          if more > 0 and walked > 0 then
            events = events + math.floor(more * events / walked + 0.5)
            walked, l[4] = walked + more, 1
          end
          l[1], l[2] = l[1] + walked, l[2] + events
          if l[1] > 0 then lanes[lane] = l end
        end
      end
    end
    local flat = {}
    for lane = 0, LAST_LANE do
      local l = lanes[lane]
      if l then
        flat[#flat + 1] = lane
        for _, v in ipairs(l) do flat[#flat + 1] = v end
      end
    end
    out[#out + 1] = {fields, redis.call('HGETALL', s.base .. 'routes'),
      tonumber(redis.call('HGET', KEYS[1], token) or '0'), redis.call('LLEN', s.base .. 'deadletters'),
      flying, head, flat}
  end
end
return out

-- Places in flight (lib/partitions.lua): a subscriber of concurrency c > 1 has at most c
-- partitions with a delivery in flight, counted in its hash's `flying` (the partitions
-- whose flight hash holds `inflight`: begin_delivery counts a mark it sets, fence and a
-- begin that replaces an abandoned mark uncount one). A partition with a batch ready
-- while c are in flight waits in the sorted set `waiting`.
--
-- Who goes first when a place frees: the one waiting longest, brought forward by
-- PLACE_BONUS_MS for each doubling of the batches it has queued (its score: when it
-- began to wait, less that bonus). Without the bonus a burst ends in a long tail: every
-- partition moves at the same pace, so the few that hash many keys are the last ones
-- still going, with most places idle (bench/keys.py: 860 events/s where 64 places of
-- 50 ms make 1,280). The bonus is logarithmic and bounded by the backlog, so nobody
-- waits for ever: a partition of one batch waits at most about PLACE_BONUS_MS x
-- log2(the largest backlog) longer than in arrival order (3 s behind a million).
--
-- A place is never handed over: whoever begins takes one while fewer partitions than
-- there are free places are ahead of it in `waiting`; the others join it. So a
-- partition that has just finished a delivery competes for its place with those
-- waiting, as an equal, and every exit that takes no place leaves `waiting` and wakes
-- the next (stale entries clear themselves: a woken partition with nothing ready leaves),
-- as does a change of concurrency, which may add places (subscribe.lua).

local PLACE_BONUS_MS = 250

-- The score `d`'s partition waits with: now, less the bonus for its batches queued.
local function place_score(d)
  local batches = 0
  for lane = 0, LAST_LANE do batches = batches + redis.call('LLEN', d.q .. 'lane:' .. lane) end
  return d.now - math.floor(PLACE_BONUS_MS * math.log(1 + batches) / math.log(2))
end

-- Make due the jobs of the partitions of subscriber `token` first in line, one for each
-- free place (a job already due or held is left alone: job_due_by); `jobs`: the shard's
-- jobs index, scheduled and instant of queue main. An entry without a job (its layout
-- replaced) is dropped, and the one behind it woken in its stead: a dropped entry must
-- not leave a free place with nobody woken to take it.
local function line_wake(shard_base, token, jobs, now)
  local base = shard_base .. 'sub:' .. token .. ':'
  local meta = redis.call('HMGET', base .. 'subscriber', 'concurrency', 'flying')
  local free = tonumber(meta[1] or '1') - tonumber(meta[2] or '0')
  local waiting, woken = base .. 'waiting', 0
  while free > 0 do  -- each pass wakes or drops at least one, or finds the line ended
    local pids = redis.call('ZRANGE', waiting, woken, woken + free - 1)
    if #pids == 0 then return end
    for _, pid in ipairs(pids) do
      local job = redis.call('HGET', sub_ctx(shard_base, pid).flight, 'job')
      if job then
        job_due_by(jobs[1], jobs[2], jobs[3], job, now, now)
        woken, free = woken + 1, free - 1
      else
        redis.call('ZREM', waiting, pid)
      end
    end
  end
end

-- line_wake for the subscriber of delivery `d`.
local function places_wake(d)
  line_wake(d.s.shard, d.token, {d.k[5], d.k[6], d.k[7]}, d.now)
end

-- A place for `d`'s partition, which has a batch ready: taken (true), or it waits in
-- line (false), the ones ahead of it woken if places are free.
local function place_take(d, cap)
  local waiting = d.base .. 'waiting'
  local free = cap - tonumber(redis.call('HGET', d.k[1], 'flying') or '0')
  local score = tonumber(redis.call('ZSCORE', waiting, d.s.pid) or place_score(d))
  -- scores are whole ms: those below it are the ones ahead
  if free > 0 and redis.call('ZCOUNT', waiting, '-inf', score - 1) < free then
    redis.call('HINCRBY', d.k[1], 'flying', 1)
    redis.call('ZREM', waiting, d.s.pid)
    return true
  end
  redis.call('ZADD', waiting, 'NX', score, d.s.pid)
  if free > 0 then places_wake(d) end
  return false
end

-- `d`'s partition takes no place (nothing ready, in backoff, paused, or its layout
-- draining): out of line, and the next woken in its stead.
local function place_leave(d)
  redis.call('ZREM', d.base .. 'waiting', d.s.pid)
  places_wake(d)
end

-- A delivery of `d`'s partition ended: its place is free for the first in line.
local function place_free(d)
  redis.call('HINCRBY', d.k[1], 'flying', -1)
  places_wake(d)
end

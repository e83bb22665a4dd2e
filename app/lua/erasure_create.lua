-- Record an erasure and queue its job (aux `erase`): no erasure is asked for without
-- the job that carries it out (app/models/erasures.py). Each one costs passes over
-- every queue, so a client may have only so many running at once, and the bus so many
-- in all: past either, nothing is recorded.
-- USES jobs
-- KEYS[1] the catalog's erasures sorted set
-- KEYS[2] the erasure's record (hash)
-- KEYS[3] aux jobs index set, KEYS[4] aux scheduled sorted set, KEYS[5] aux instant list
-- KEYS[6] the set of erasures running
-- ARGV[1] the erasure's id, ARGV[2] now (ms), ARGV[3] its job (msgpack)
-- ARGV[4] the asking client's key ('' for root), ARGV[5] most running in all,
-- ARGV[6] most running for one client
-- ARGV[7..] the record's fields and values, flat
-- Returns 1, or -1 when the bus has its most running, -2 when the client has.
local running = redis.call('SMEMBERS', KEYS[6])
if #running >= tonumber(ARGV[5]) then return -1 end
if ARGV[4] ~= '' then
  local mine = 0
  for _, id in ipairs(running) do
    if redis.call('HGET', string.sub(KEYS[2], 1, #KEYS[2] - #ARGV[1]) .. id, 'by_token') == ARGV[4] then
      mine = mine + 1
    end
  end
  if mine >= tonumber(ARGV[6]) then return -2 end
end
redis.call('HSET', KEYS[2], unpack(ARGV, 7))
redis.call('ZADD', KEYS[1], tonumber(ARGV[2]), ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
job_push(KEYS[3], KEYS[4], KEYS[5], ARGV[3], tonumber(ARGV[2]), tonumber(ARGV[2]))
return 1

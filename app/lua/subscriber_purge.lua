-- Delete a bounded number of batches from one trash lane list left by subscriber_delete
-- (their events were counted as dropped there), with their entries in the lane's batch
-- index; forget the trash member once its list is empty. Safe to repeat after a crash.
-- USES batches
-- KEYS[1] the shard's trash set
-- KEYS[2] the trash lane list (`P{s:N}:sub:<token>:trash:<n>:<lane>`)
-- KEYS[3] the shard's batch index sorted set of the lane
-- ARGV[1] the shard's key base
-- ARGV[2] the trash member (`<token>/<n>/<lane>`)
-- ARGV[3] token
-- ARGV[4] most batches to delete in this call
-- Returns the number of batches still in the trash list.
local base = sub_ctx(ARGV[1], ARGV[3]).base
local ids = redis.call('LPOP', KEYS[2], tonumber(ARGV[4]))
if ids then
  for _, id in ipairs(ids) do
    redis.call('UNLINK', base .. 'batch:' .. id)
    redis.call('ZREM', KEYS[3], index_member(ARGV[3], id))
  end
end
local left = redis.call('LLEN', KEYS[2])
if left == 0 then redis.call('SREM', KEYS[1], ARGV[2]) end
return left

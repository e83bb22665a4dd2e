-- Records that a migration finished: the store's layout moves from the one the
-- migration began at to the one it leaves, and only from that one, so a migration two
-- processes finished at once moves it once, and never backwards.
-- KEYS[1] the catalog's meta hash
-- ARGV[1] the layout the migration began at
-- ARGV[2] the layout it leaves
-- Returns the layout recorded after the call.
local found = tonumber(redis.call('HGET', KEYS[1], 'layout') or '0')
if found == tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'layout', ARGV[2])
  return tonumber(ARGV[2])
end
return found

-- The layout this store holds (app/release.py), recorded on first sight: a store with
-- no record is either new (it gets the starting process's layout) or was written before
-- layouts were numbered (it gets the first layout, 1), told apart by whether a client,
-- a topic or a shard count was ever written. Never changes a record that is there.
-- KEYS[1] the catalog's meta hash
-- KEYS[2] the catalog's tokens hash
-- KEYS[3] the catalog's topics set
-- ARGV[1] the layout of the starting process (what a new store gets)
-- Returns the layout recorded.
local found = redis.call('HGET', KEYS[1], 'layout')
if found then
  return tonumber(found)
end
local used = redis.call('HEXISTS', KEYS[1], 'shards') == 1
  or redis.call('EXISTS', KEYS[2], KEYS[3]) > 0
local layout = used and 1 or tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'layout', layout)
return layout

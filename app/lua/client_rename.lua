-- Rename a client (`busbar clients rename`, app/models/client_names.py): the catalog
-- step, before the shard's (the subscriber hash's `name`, which the delivery log and
-- the lake carry). The new name must be free; the old one is released, and a name shared
-- since before names were unique goes to the one client left carrying it.
-- USES names
-- KEYS[1] tokens hash (client key -> name)
-- KEYS[2] names hash (name -> the client key carrying it, '' when shared from before)
-- ARGV[1] the client's key
-- ARGV[2] the new name
-- Returns {1, old name}, or with nothing written: {0, old name} it has that name already
-- (a repeat), {-1} no such client, {-2} another client has the name.
local tokens, names, key, name = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
names_build(names, tokens)
local old = redis.call('HGET', tokens, key)
if not old then return {-1} end
if old == name then return {0, old} end
if name_holder(names, tokens, name) then return {-2} end
redis.call('HSET', tokens, key, name)
redis.call('HSET', names, name, key)
name_release(names, tokens, old, key)
return {1, old}

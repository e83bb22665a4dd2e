-- Store a new version of the JSON Schema of a topic's events of one type (PUT
-- /topics/<topic>/schemas/<type>), checked by the web before (app/models/schemas.py).
-- The caller must be the topic's publisher or the root key; a topic nobody has
-- published to is claimed by a client's first PUT, as by a first publish. The same
-- schema as the current version is no change (the same version back). A change takes a
-- new rules version for the topic, so no publish is checked against a schema that no
-- longer holds (publish.lua refuses a publish checked by another version). Past the
-- versions kept, the oldest is forgotten.
-- USES filters schemas
-- KEYS[1] topics set
-- KEYS[2] topic hash
-- KEYS[3] topic schemas hash (lib/schemas.lua)
-- ARGV[1] topic name
-- ARGV[2] caller token, or '' for the root key
-- ARGV[3] event type
-- ARGV[4] the schema, compact JSON
-- ARGV[5] now, ms
-- ARGV[6] versions kept per type
-- ARGV[7] the catalog's key base (lib/filters.lua's rules version)
-- Returns {status, version}: status 1 stored as a new version, 0 the same as the
-- current version (unchanged), -1 the topic belongs to another publisher.
local topic, caller, type_, schema = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local publisher = redis.call('HGET', KEYS[2], 'publisher')
if caller ~= '' and publisher and publisher ~= caller then return {-1, 0} end
local current = redis.call('HGET', KEYS[3], type_)
if current then
  local stored = redis.call('HGET', KEYS[3], type_ .. ':' .. current)
  if stored and schema_json(stored) == schema then return {0, tonumber(current)} end
end
if caller ~= '' and not publisher then redis.call('HSET', KEYS[2], 'publisher', caller) end
redis.call('SADD', KEYS[1], topic)
local n = redis.call('HINCRBY', KEYS[3], type_ .. ':last', 1)
redis.call('HSET', KEYS[3], type_ .. ':' .. n, ARGV[5] .. '|0|' .. schema, type_, n)
local gone = n - tonumber(ARGV[6])
if gone >= 1 then redis.call('HDEL', KEYS[3], type_ .. ':' .. gone) end
new_rules_version(ARGV[7], topic)
return {1, n}

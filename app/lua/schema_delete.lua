-- Remove the schema of a topic's events of one type, every kept version with it (DELETE
-- /topics/<topic>/schemas/<type>): its publishes are checked no more. `<type>:last`
-- stays, so a later PUT does not number a new schema as an old one was. The topic's
-- publisher or the root key only; a new rules version, as for a PUT.
-- USES filters schemas
-- KEYS[1] topic hash
-- KEYS[2] topic schemas hash (lib/schemas.lua)
-- ARGV[1] topic name
-- ARGV[2] caller token, or '' for the root key
-- ARGV[3] event type
-- ARGV[4] versions kept per type (how far back versions may be)
-- ARGV[5] the catalog's key base
-- Returns 1 removed, 0 the type has no schema, -1 the caller may not change them.
local topic, caller, type_ = ARGV[1], ARGV[2], ARGV[3]
if not may_change_schemas(KEYS[1], caller) then return -1 end
local current = redis.call('HGET', KEYS[2], type_)
if not current then return 0 end
local last = tonumber(redis.call('HGET', KEYS[2], type_ .. ':last') or current)
for n = math.max(1, last - tonumber(ARGV[4]) + 1), last do
  redis.call('HDEL', KEYS[2], type_ .. ':' .. n)
end
redis.call('HDEL', KEYS[2], type_)
new_rules_version(ARGV[5], topic)
return 1

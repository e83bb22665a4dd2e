-- Read what a publish to a topic is checked against, and its rules version, at once: the
-- subscribers' content filters (lib/filters.lua) and the current schema of each event
-- type (lib/schemas.lua), for a web process about to check a publish's events: the
-- version it names in the publish is the one these are at.
-- KEYS[1] the topic hash
-- KEYS[2] the topic's filters hash (token -> JSON list of filters)
-- KEYS[3] the topic's schemas hash
-- ARGV[1] the version the caller holds: when it is the topic's, nothing else is sent
-- ARGV[2..] the event types (app/codec.py's EVENT_TYPES)
-- Returns {version (0: never had any), {token, filters, ...}, {type, schema version,
-- `<at>|<deprecated>|<schema JSON>`, ...}}, or {version} when the caller holds that
-- version.
local version = tonumber(redis.call('HGET', KEYS[1], 'filters') or '0')
if tostring(version) == ARGV[1] then return {version} end
local schemas = {}
for i = 2, #ARGV do
  local current = redis.call('HGET', KEYS[3], ARGV[i])
  local stored = current and redis.call('HGET', KEYS[3], ARGV[i] .. ':' .. current)
  if stored then
    schemas[#schemas + 1] = ARGV[i]
    schemas[#schemas + 1] = current
    schemas[#schemas + 1] = stored
  end
end
return {version, redis.call('HGETALL', KEYS[2]), schemas}

-- Read a topic's content filters and their version at once (lib/filters.lua), for a web
-- process about to match a publish's events against them: the version it names in the
-- publish is the one these filters are at.
-- KEYS[1] the topic hash
-- KEYS[2] the topic's filters hash (token -> JSON list of filters)
-- ARGV[1] the version the caller holds: when it is the topic's, the filters are not sent
-- Returns {version (0: never had any), token, filters, ...}, or {version} when the caller
-- holds that version.
local version = tonumber(redis.call('HGET', KEYS[1], 'filters') or '0')
if tostring(version) == ARGV[1] then return {version} end
local found = redis.call('HGETALL', KEYS[2])
table.insert(found, 1, version)
return found

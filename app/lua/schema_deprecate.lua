-- Mark one kept version of a type's schema deprecated, or not (PATCH
-- /topics/<topic>/schemas/<type>/versions/<n>). A deprecated version still checks
-- publishes while it is current: the mark tells publishers and subscribers it is on its
-- way out (listings, the console), so what is checked does not change, nor the rules
-- version. The topic's publisher or the root key only.
-- USES schemas
-- KEYS[1] topic hash
-- KEYS[2] topic schemas hash (lib/schemas.lua)
-- ARGV[1] caller token, or '' for the root key
-- ARGV[2] event type
-- ARGV[3] version
-- ARGV[4] '1' deprecated, '0' not
-- Returns 1 done, 0 no such version, -1 the caller may not change them.
if not may_change_schemas(KEYS[1], ARGV[1]) then return -1 end
local field = ARGV[2] .. ':' .. ARGV[3]
local stored = redis.call('HGET', KEYS[2], field)
if not stored then return 0 end
local first = string.find(stored, '|', 1, true)
redis.call('HSET', KEYS[2], field, string.sub(stored, 1, first) .. ARGV[4] .. string.sub(stored, first + 2))
return 1

-- A topic's event schemas (`P{c}:topic:<name>:schemas`, app/models/keys.py): for each
-- type, `<type>` the current version, `<type>:last` the last version drawn (kept when
-- the schema is deleted, so a number never names two schemas while the topic lives),
-- and `<type>:<n>` each kept version as `<at ms>|<deprecated 0/1>|<schema JSON>`: the
-- flag is read and set without decoding a publisher's JSON (cjson would rewrite it).
-- Needs lib/filters.lua (a change takes a new rules version).

-- Whether `caller` (a token; '' the root key) may change or remove the topic's schemas:
-- its publisher or the root key (schema_put.lua also lets a client claim a topic that
-- has no publisher yet, as a first publish would).
local function may_change_schemas(topic_key, caller)
  if caller == '' then return true end
  local publisher = redis.call('HGET', topic_key, 'publisher')
  return publisher == caller
end

local function schema_json(stored)
  local first = string.find(stored, '|', 1, true)
  return string.sub(stored, first + 3)
end

-- A subscriber's content filters on a topic, kept where the web reads them: the
-- topic's filters hash (`P{c}:topic:<name>:filters`, token -> JSON list of the filter
-- of each filtered route, in the order their numbers name them). Each change gives the
-- topic a new filters version (the topic hash's `filters`), drawn from one counter of
-- the catalog, so a version is never used twice, not even by a topic deleted and made
-- again; a publish names the version its web process matched against, and is refused
-- when it is not the topic's (publish.lua), so no event is matched against filters
-- that have changed.

-- A change of what a publish to `topic` is checked against (its content filters, its
-- event schemas: lib/schemas.lua) takes the next version of the catalog's counter.
local function new_rules_version(base, topic)
  local version = redis.call('INCR', base .. 'filters:version')
  redis.call('HSET', base .. 'topic:' .. topic, 'filters', version)
end

-- Set (`filters` a JSON list) or clear (`filters` '') `token`'s filters on `topic`;
-- `base` is the catalog's key base. A new version only when something changed.
local function set_filters(base, topic, token, filters)
  local key = base .. 'topic:' .. topic .. ':filters'
  local before = redis.call('HGET', key, token)
  if filters == '' then
    if not before then return end
    redis.call('HDEL', key, token)
  else
    if before == filters then return end
    redis.call('HSET', key, token, filters)
  end
  new_rules_version(base, topic)
end

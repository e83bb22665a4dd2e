-- Shared by the scripts that make an operational event true (pause and resume, the
-- circuit opening and closing, dead letters, Autodrop): prepended to a script whose
-- header says `-- USES operations`. The event is appended to the shard's operations
-- stream in the same step, so it is told exactly when it happened, and the Operations
-- job (app/services/operations.py) publishes it to `busbar_operations`.

-- Append `kind` about a subscriber (its hash `subscriber_key`, read for its client
-- name: never the token) with `data` (a table; its `subscriber` is set here) to the
-- operations stream of the shard whose key base is `shard_base`.
local function note_operation(shard_base, subscriber_key, kind, data)
  data.subscriber = redis.call('HGET', subscriber_key, 'name') or '(deleted client)'
  redis.call('XADD', shard_base .. 'operations', 'MAXLEN', '~', OPERATIONS_KEPT, '*',
    'kind', kind, 'data', cjson.encode(data))
end

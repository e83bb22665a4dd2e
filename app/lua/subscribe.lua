-- The shard step of creating or replacing a client's subscription: its settings and
-- the routes it lists. It runs before subscribe_route (the catalog step), so a
-- subscriber exists before anything is routed to it; a retry after a crash in between
-- redoes both. What is already queued keeps the lane and expiry it was queued with.
-- KEYS[1] the subscriber hash
-- KEYS[2] the subscriber's routes hash (topic -> JSON route list)
-- ARGV[1] callback
-- ARGV[2] uuid
-- ARGV[3] '1' when the client gave the uuid, '0' to keep a stored one
-- ARGV[4] timeout ms, ARGV[5] max_events, ARGV[6] max_attempts, ARGV[7] job, ARGV[8] now
-- ARGV[9] the client's name (logs and the delivery log name clients, never by token)
-- ARGV[10] event_ids ('1' or '0'), ARGV[11] salt of the signing secret, kept if one exists
-- ARGV[12..] topics, two values each: name, routes (JSON)
-- Returns 1.
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'uuid', ARGV[2])
else
  redis.call('HSETNX', KEYS[1], 'uuid', ARGV[2])
end
redis.call('HSET', KEYS[1], 'callback', ARGV[1], 'timeout', ARGV[4], 'max_events', ARGV[5],
  'max_attempts', ARGV[6], 'job', ARGV[7], 'name', ARGV[9], 'event_ids', ARGV[10])
redis.call('HSETNX', KEYS[1], 'secret_salt', ARGV[11])
redis.call('HSETNX', KEYS[1], 'health_points', 100)
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[8])
redis.call('HSETNX', KEYS[1], 'sent', 0)
redis.call('DEL', KEYS[2])
for i = 12, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1

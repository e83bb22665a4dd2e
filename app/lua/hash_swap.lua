-- Replace one field of a hash only if it still holds what the caller read: `busbar
-- secrets reseal` seals each secret again under the current key (a subscriber's
-- `headers`, a push key's entry: app/services/sealed_headers.py), and a change that
-- lands in between (a POST /subscription, a key rotation) must not be undone by it.
-- KEYS[1] the hash
-- ARGV[1] the field, ARGV[2] its value as read, ARGV[3] its new value
-- Returns 1 when replaced, 0 when the field had changed (or is gone).
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1

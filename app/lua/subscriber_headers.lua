-- Replace a subscriber's `headers` field only if it still holds what the caller read:
-- `busbar secrets reseal` seals each secret again under the current key
-- (app/services/callback_headers.py), and a POST /subscription that lands in between
-- must not be undone by it.
-- KEYS[1] the subscriber hash
-- ARGV[1] the field as read, ARGV[2] its new text
-- Returns 1 when replaced, 0 when the field had changed (or the subscriber is gone).
if redis.call('HGET', KEYS[1], 'headers') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'headers', ARGV[2])
return 1

-- Finish an erasure: its state, when, and its `match` with the value replaced by its
-- fingerprint (app/models/erasures.py's forgotten()), and it no longer counts as running.
-- KEYS[1] the erasure's record (hash)
-- KEYS[2] the set of erasures running
-- ARGV[1] the erasure's id, ARGV[2] now (ms), ARGV[3] the match as kept from now on
-- Returns 1.
redis.call('HSET', KEYS[1], 'state', 'done', 'finished_at', ARGV[2], 'match', ARGV[3])
redis.call('SREM', KEYS[2], ARGV[1])
return 1

-- Record an erasure and queue its job (aux `erase`): no erasure is asked for without
-- the job that carries it out (app/models/erasures.py).
-- USES jobs
-- KEYS[1] the catalog's erasures sorted set
-- KEYS[2] the erasure's record (hash)
-- KEYS[3] aux jobs index set, KEYS[4] aux scheduled sorted set, KEYS[5] aux instant list
-- ARGV[1] the erasure's id, ARGV[2] now (ms), ARGV[3] its job (msgpack)
-- ARGV[4..] the record's fields and values, flat
-- Returns 1.
redis.call('HSET', KEYS[2], unpack(ARGV, 4))
redis.call('ZADD', KEYS[1], tonumber(ARGV[2]), ARGV[1])
job_push(KEYS[3], KEYS[4], KEYS[5], ARGV[3], tonumber(ARGV[2]), tonumber(ARGV[2]))
return 1

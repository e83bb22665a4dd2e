-- A worker thread's sweep of the shards for a delivery job, and the start of that
-- delivery, in one step: the first job found in the instant lists, in the order given,
-- moves to this thread's pending list of its shard (lib/jobs.lua's take), then its
-- subscriber's next due batch begins as deliver_begin would begin it. On a single Redis
-- one call sweeps every shard; on a cluster each call names one shard.
-- USES batches jobs delivery
-- KEYS[3i-2], KEYS[3i-1], KEYS[3i]: shard i's jobs instant list, this worker's pending
--   list there, and its pending index set
-- ARGV[1] the worker (`<process>/<slot>`)
-- ARGV[2] now, ms
-- ARGV[3] nonce for the delivery, ARGV[4] a fresh salt (see deliver_begin)
-- ARGV[4+i] shard i's key base
-- Returns nil when no shard had a job, else {i, job, <what deliver_begin returns>, the
-- jobs still waiting in the lists swept}: a job that is not a delivery (none are, on
-- queue main) comes back with {'run'}.
return sweep_and_begin(KEYS, 1, {unpack(ARGV, 5)}, ARGV[1], tonumber(ARGV[2]), ARGV[3],
  ARGV[4])

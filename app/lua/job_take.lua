-- Take the first job found among several places' instant lists, in the order given,
-- into the worker's pending list of the place it came from: a worker thread sweeping
-- the shards, starting one further each time, so every shard gets its turn. On a single
-- Redis one call sweeps them all; on a cluster each call names one shard.
-- USES jobs
-- KEYS[3i-2], KEYS[3i-1], KEYS[3i]: place i's instant list, the worker's pending list
--   there, and its pending index set
-- ARGV[1] the worker (`<process>/<slot>`)
-- Returns {i, job} for the first place that had a job, or nil.
for i = 1, #KEYS, 3 do
  local job = job_take(KEYS[i], KEYS[i + 1], KEYS[i + 2], ARGV[1])
  if job then return {(i + 2) / 3, job} end
end
return nil

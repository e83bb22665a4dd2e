-- Start one subscriber's next delivery, run by its delivery job: pick the next due batch
-- by (lane, age), drop its expired events, mark it in flight with the caller's nonce and
-- return it; or settle the job when the subscriber is in backoff, has nothing due, or is
-- gone. A worker that no longer holds the job (scrubbed while paused) changes nothing.
-- USES batches jobs delivery
-- KEYS[1..11] as lib/delivery.lua lists them: subscriber, the shard's event gauge, batch gauge
-- and counters, KEYS[5..7] its jobs index, scheduled, instant of queue main, KEYS[8] the
-- worker's pending list, KEYS[9] dead letters, KEYS[10] the shard's delivery log,
-- KEYS[11] the shard's attempt stream
-- ARGV[1] the shard's key base, ARGV[2] the partition's pid (the subscriber's token at
--   concurrency 1; lib/partitions.lua), ARGV[3] now (ms), ARGV[4] the job
-- ARGV[5] nonce: identifies this delivery to its ack or fail
-- ARGV[6] a fresh salt: the signing secret of a subscriber from before secrets existed
-- Returns {'deliver', lane, id, created_at, attempts, callback, uuid, client name (for
-- logs, never the token), {entry...}, event_ids ('1' or ''), {salt of each secret that
-- signs now: the current one, and the previous one during its grace}, failing ('1' when
-- its last attempt failed, else ''), the lake replay that queued it (or '')},
-- {'wait', due}, {'idle'}, {'gone'} or {'lost'}.
return begin_delivery(delivery_ctx(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], KEYS),
  ARGV[5], ARGV[6])

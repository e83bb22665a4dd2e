-- Stop one subscriber's routes on one topic; the subscriber stays, possibly with no topic.
-- KEYS[1] the subscriber's routes hash
-- KEYS[2] the topic's subscribers hash
-- ARGV[1] token
-- ARGV[2] topic
-- Returns 1 when the subscriber had routes on the topic, 0 otherwise.
if redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1

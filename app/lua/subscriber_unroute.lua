-- The catalog step of deleting a subscriber, run before its shard step: nothing is
-- routed to it any more, it leaves the subscribers, and optionally its client goes (no
-- token of it authenticates any more; its name is free). Deleting one token of a client
-- that has another removes only that token, and the client, its subscription and its
-- name stay. Idempotent: a retry after a crash between the two steps finds nothing here
-- and the shard step finishes the job.
-- USES filters names
-- KEYS[1] tokens hash (client key -> name)
-- KEYS[2] subscribers hash (token -> JSON list of its topics)
-- KEYS[3] aliases hash (an added token -> its client's key; a key whose own token was
--         deleted -> '')
-- KEYS[4] names hash (name -> the client key carrying it)
-- ARGV[1] the catalog's key base (`P{c}:`), naming the topics' subscriber hashes
-- ARGV[2] the client's key (its subscriber's token)
-- ARGV[3] '1' to forget the client too (its tokens, name and operator mark,
--         `P{c}:operators`)
-- ARGV[4] with ARGV[3] '1': the token being deleted, of which the client may have
--         others; '' to forget the client with every token it has
-- Returns 1 when the subscriber was in the catalog, 0 otherwise, 2 when the token
-- deleted was not the client's last: only it went.
local tokens, aliases, names = KEYS[1], KEYS[3], KEYS[4]
local token = ARGV[2]
if ARGV[3] == '1' then
  local added, all = {}, redis.call('HGETALL', aliases)
  for i = 1, #all, 2 do
    if all[i + 1] == token then added[#added + 1] = all[i] end
  end
  local own = redis.call('HEXISTS', tokens, token) == 1 and
    redis.call('HGET', aliases, token) ~= ''
  local login = ARGV[4]
  if login ~= '' then
    local count, held = #added, false
    if own then count = count + 1 end
    if login == token then held = own end
    for _, t in ipairs(added) do
      if t == login then held = true end
    end
    if held and count > 1 then
      if login == token then
        redis.call('HSET', aliases, token, '')
      else
        redis.call('HDEL', aliases, login)
      end
      return 2
    end
    if not held and count > 0 then return 2 end  -- gone already; the client has others
  end
  names_build(names, tokens)
  local name = redis.call('HGET', tokens, token)
  if name then name_release(names, tokens, name, token) end
  redis.call('HDEL', tokens, token)
  names_counted(names, tokens)
  redis.call('HDEL', aliases, token, unpack(added))
  redis.call('SREM', ARGV[1] .. 'operators', token)
end
local topics = redis.call('HGET', KEYS[2], token)
if not topics then return 0 end
for _, topic in ipairs(cjson.decode(topics)) do
  redis.call('HDEL', ARGV[1] .. 'topic:' .. topic .. ':subscribers', token)
  set_filters(ARGV[1], topic, token, '')
end
redis.call('HDEL', KEYS[2], token)
return 1

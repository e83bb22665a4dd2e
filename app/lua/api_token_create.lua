-- Create a client, or add a token to one (POST /api_tokens, app/models/tokens.py), in
-- one step on the catalog: a name is one client's, so two creations of one name cannot
-- both succeed; a token is never given to another client; the operator mark is set on
-- the client the token acts as. A token posted again with its client's name (added or
-- not) changes nothing but the mark, so a retried request is answered as the first.
-- USES names
-- KEYS[1] tokens hash (client key -> name)
-- KEYS[2] aliases hash (an added token -> its client's key; a key whose own token was
--         deleted -> '')
-- KEYS[3] names hash (name -> the client key carrying it, '' when shared from before)
-- KEYS[4] operators set (client keys)
-- ARGV[1] the client's name
-- ARGV[2] the token
-- ARGV[3] '1' to add the token to the client of that name, '0' to create a client
-- ARGV[4] '1' to mark the client an operator, '0' to clear its mark, '' to leave it
-- Returns {1, client key, 1 if an operator else 0}; or, nothing written: {-1} the token
-- is another client's, {-2} the name is another client's, {-3} the token was deleted
-- from its client (a key that no longer authenticates), {-4} no client has that name
-- (to add to), {-5, n} n clients share the name (made before names were unique).
local tokens, aliases, names, operators = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, token, add = ARGV[1], ARGV[2], ARGV[3] == '1'
names_build(names, tokens)

local client = redis.call('HGET', aliases, token)
if client == '' then return {-3} end
if not client and redis.call('HEXISTS', tokens, token) == 1 then client = token end
if client then
  if redis.call('HGET', tokens, client) ~= name then return {-1} end
else
  local holder = name_holder(names, tokens, name)
  if add then
    if not holder then return {-4} end
    if holder == '' then return {-5, #name_carriers(tokens, name, '')} end
    redis.call('HSET', aliases, token, holder)
    client = holder
  else
    if holder then return {-2} end
    redis.call('HSET', tokens, token, name)
    redis.call('HSET', names, name, token)
    names_counted(names, tokens)
    client = token
  end
end
if ARGV[4] == '1' then
  redis.call('SADD', operators, client)
elseif ARGV[4] == '0' then
  redis.call('SREM', operators, client)
end
return {1, client, redis.call('SISMEMBER', operators, client)}

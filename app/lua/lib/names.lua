-- Client names: the index that makes a name one client's (`P{c}:names`, name -> the
-- key of the client that carries it, or '' while clients made before names were unique
-- share it; app/models/keys.py). Prepended to a script whose header says `-- USES
-- names`: creating a client (api_token_create.lua), renaming one (client_rename.lua)
-- and forgetting one (subscriber_unroute.lua) keep it, each in the step that changes
-- the tokens hash, so two creations of one name can never both succeed.

-- Every client key that carries `name` in the tokens hash, but `except`: a scan, run
-- only for a name shared from before the index.
local function name_carriers(tokens, name, except)
  local found, all = {}, redis.call('HGETALL', tokens)
  for i = 1, #all, 2 do
    if all[i + 1] == name and all[i] ~= except then found[#found + 1] = all[i] end
  end
  return found
end

-- The index, built again from the tokens hash unless it was made from a tokens hash of
-- the size that hash has now (its field '', which no name can be): a bus from before the
-- index, or one where a process from before it created or deleted a client since. A
-- name several clients carry is marked shared ('').
local function names_build(names, tokens)
  local count = redis.call('HLEN', tokens)
  if redis.call('HGET', names, '') == tostring(count) then return end
  redis.call('DEL', names)
  local all = redis.call('HGETALL', tokens)
  for i = 1, #all, 2 do
    if redis.call('HSETNX', names, all[i + 1], all[i]) == 0 then
      redis.call('HSET', names, all[i + 1], '')
    end
  end
  redis.call('HSET', names, '', count)
end

-- After a script added a client to the tokens hash or removed one: the index matches it.
local function names_counted(names, tokens)
  redis.call('HSET', names, '', redis.call('HLEN', tokens))
end

-- Who carries `name`: a client key, '' (shared since before the index) or false (free).
-- An entry whose client no longer carries the name (deleted or renamed by a process from
-- before the index) leaves the name free.
local function name_holder(names, tokens, name)
  local key = redis.call('HGET', names, name)
  if not key or key == '' then return key end
  if redis.call('HGET', tokens, key) ~= name then return false end
  return key
end

-- Client `key` no longer carries `name` (it is deleted or renamed): the name is free,
-- or, shared since before the index, it goes to the one client left carrying it.
local function name_release(names, tokens, name, key)
  local held = redis.call('HGET', names, name)
  if held == key then
    redis.call('HDEL', names, name)
  elseif held == '' then
    local left = name_carriers(tokens, name, key)
    if #left == 0 then
      redis.call('HDEL', names, name)
    elseif #left == 1 then
      redis.call('HSET', names, name, left[1])
    end
  end
end

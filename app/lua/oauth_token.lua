-- A subscriber's OAuth2 access token, cached for every worker of the bus
-- (app/models/oauth_tokens.py): one worker at a time fetches (the claim), the others use
-- what it stored. `get` answers the cached token while it is fresh, and claims the fetch
-- when it is not (or soon will not be) and nobody holds an unexpired claim; `drop` first
-- forgets the cached token if it is still the one a callback refused (a 401), then does
-- what `get` does, so of all the workers a refused token reaches only one fetches again;
-- `put` stores a fetched token and releases the claim; `release` releases it (the fetch
-- failed). The hash expires with what it holds: a deleted subscriber's goes by itself.
-- KEYS[1] the subscriber's token cache hash
-- ARGV[1] 'get', 'drop', 'put' or 'release'
-- ARGV[2] now (ms)
-- ARGV[3] the fingerprint of the subscriber's stored auth the token is for
-- ARGV[4] the worker asking (the claim's owner)
-- ARGV[5] how long a claim holds (ms)
-- ARGV[6] drop: the digest of the token refused; put: the sealed token fetched
-- ARGV[7] put: when to fetch again (ms)
-- ARGV[8] put: when the token expires (ms)
-- ARGV[9] put: the token's digest (what a drop names it by)
-- Returns {'token', sealed token, refresh at, expires at}, {'fetch', sealed token still
-- valid or '', its expiry or 0}, {'wait', claim until} or {'done'}.
local key, op, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
local fp, worker, claim_ms = ARGV[3], ARGV[4], tonumber(ARGV[5])

local function release()
  if redis.call('HGET', key, 'claim') == worker then redis.call('HDEL', key, 'claim', 'claim_until') end
end

if op == 'put' then
  local expires = tonumber(ARGV[8])
  redis.call('HSET', key, 'token', ARGV[6], 'fp', fp, 'refresh_at', ARGV[7], 'expires_at', expires,
    'digest', ARGV[9])
  release()
  redis.call('PEXPIREAT', key, math.max(expires, now + claim_ms))
  return {'done'}
end
if op == 'release' then
  release()
  return {'done'}
end
if op == 'drop' and redis.call('HGET', key, 'digest') == ARGV[6] then
  redis.call('HDEL', key, 'token', 'fp', 'refresh_at', 'expires_at', 'digest')
end

local f = redis.call('HMGET', key, 'token', 'fp', 'refresh_at', 'expires_at', 'claim_until')
local valid = f[1] and f[2] == fp and tonumber(f[4]) > now
if valid and tonumber(f[3]) > now then return {'token', f[1], f[3], f[4]} end
if not f[5] or tonumber(f[5]) <= now then
  redis.call('HSET', key, 'claim', worker, 'claim_until', now + claim_ms)
  redis.call('PEXPIREAT', key, math.max(valid and tonumber(f[4]) or 0, now + claim_ms))
  if valid then return {'fetch', f[1], f[4]} end
  return {'fetch', '', 0}
end
if valid then return {'token', f[1], f[3], f[4]} end
return {'wait', f[5]}

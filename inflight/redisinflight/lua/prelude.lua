-- sluice inflight/redisinflight: the prelude of every script.
--
-- A key's leases are two Redis keys sharing one hash tag (one Cluster
-- slot):
--
--   KEYS[1]  a sorted set: one member per lease, "<id>:<weight>" (id: 16
--            hex digits), scored by its expiry in Unix microseconds
--   KEYS[2]  a string: the sum of the weights of the set's members
--
-- Times are Unix microseconds, about 1.8e15, exact in a Lua double (below
-- 2^53); so are weights and caps (at most 2^53, inflight.MaxCap). Numbers
-- are passed to redis.call as strings formatted with %.0f, never as Lua
-- numbers, whose default conversion keeps only 14 digits.
--
-- ARGV[1]  now in Unix microseconds, or "" to read the server's clock
--          (TIME)
-- ARGV[2]  the minimum lifetime of the keys, in milliseconds (with a
--          client's clock, which Redis's expiry does not follow)
local z, w = KEYS[1], KEYS[2]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local min_ttl = tonumber(ARGV[2])

local function str(x) return string.format('%.0f', x) end

local function weight_of(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

-- total returns the weight in flight, as the counter holds it. A counter
-- lost while its set remains (evicted, deleted by hand) is recounted from
-- the members, so that it never undercounts.
local function total()
  if redis.call('EXISTS', z) == 0 then
    redis.call('DEL', w)
    return 0
  end
  local t = redis.call('GET', w)
  if t then return tonumber(t) end
  local sum = 0
  local members = redis.call('ZRANGE', z, 0, -1)
  for i = 1, #members do sum = sum + weight_of(members[i]) end
  redis.call('SET', w, str(sum))
  local pttl = redis.call('PTTL', z)
  if pttl > 0 then redis.call('PEXPIRE', w, pttl) end
  return sum
end

-- reap reclaims the leases expired at now (score <= now) and returns the
-- weight in flight after.
local function reap()
  local n = total()
  if n == 0 and redis.call('EXISTS', z) == 0 then return 0 end
  local expired = redis.call('ZRANGEBYSCORE', z, '-inf', str(now))
  if #expired == 0 then return n end
  local sum = 0
  for i = 1, #expired do sum = sum + weight_of(expired[i]) end
  redis.call('ZREMRANGEBYSCORE', z, '-inf', str(now))
  if redis.call('EXISTS', z) == 0 then
    redis.call('DEL', w)
    return 0
  end
  return tonumber(redis.call('DECRBY', w, str(sum)))
end

-- keep makes both keys live at least until the latest lease expires.
local function keep()
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  local ms = math.floor((tonumber(last[2]) - now) / 1000) + 1
  if ms < min_ttl then ms = min_ttl end
  redis.call('PEXPIRE', z, str(ms))
  redis.call('PEXPIRE', w, str(ms))
end

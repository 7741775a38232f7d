-- Acquire: reclaim the expired leases, count, and enter if under the cap.
--
-- ARGV[3]  cap
-- ARGV[4]  weight (at least 1)
-- ARGV[5]  ttl in microseconds
-- ARGV[6]  the new lease's member, "<id>:<weight>"
--
-- Reply: {allowed (1 or 0), in flight after the decision, a number}: the
-- number is the lease's expiry when allowed, else the microseconds until
-- the earliest lease expires (0 when the request weighs more than the cap).
local cap, weight, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = reap()
if weight > cap then
  return {0, n, 0}
end
if n > cap - weight then -- not n + weight > cap: that sum may round above 2^53
  local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  return {0, n, tonumber(first[2]) - now}
end
local exp = now + ttl
redis.call('ZADD', z, str(exp), ARGV[6])
n = tonumber(redis.call('INCRBY', w, str(weight)))
keep()
return {1, n, exp}

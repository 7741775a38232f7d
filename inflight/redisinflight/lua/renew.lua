-- Renew: move a live lease's expiry to now + ttl.
--
-- ARGV[3]  ttl in microseconds
-- ARGV[4]  the lease's member, "<id>:<weight>"
--
-- Reply: the new expiry, or 0 when the lease is not held (released, or
-- expired: then it is reclaimed now).
local score = redis.call('ZSCORE', z, ARGV[4])
if not score then
  return 0
end
if tonumber(score) <= now then
  reap()
  return 0
end
local exp = now + tonumber(ARGV[3])
redis.call('ZADD', z, 'XX', str(exp), ARGV[4])
keep()
return exp

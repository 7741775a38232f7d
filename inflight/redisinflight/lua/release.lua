-- Release: remove one lease, if the set still holds it.
--
-- ARGV[3]  the lease's member, "<id>:<weight>"
--
-- Reply: 1 when the lease was held, else 0. (ARGV[1] is "0": the clock is
-- not read.)
if not redis.call('ZSCORE', z, ARGV[3]) then
  return 0
end
total() -- a lost counter is recounted before it is decremented
redis.call('ZREM', z, ARGV[3])
local n = tonumber(redis.call('DECRBY', w, str(weight_of(ARGV[3]))))
if n <= 0 or redis.call('EXISTS', z) == 0 then
  redis.call('DEL', z, w)
end
return 1

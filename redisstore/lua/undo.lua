-- sluice redisstore: takes back what a fixed window's plain-command
-- increment (INCRBY, fast.go) added, when the window it counted in was not
-- the one the key's marker names, or when the request was denied (a denial
-- consumes nothing). Never below zero: a count that reaches it is deleted,
-- the same as an absent key (window.lua reads a missing count as 0).
--
-- KEYS[1]  the count's key;  ARGV[1]  what to take back (> 0)
-- DECRBY keeps the expiry, and is exact where Lua's doubles are not (a
-- count plus an increment may pass 2^53).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('DECRBY', KEYS[1], ARGV[1]) <= 0 then
  redis.call('DEL', KEYS[1])
end
return 1

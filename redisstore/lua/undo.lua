-- sluice redisstore: takes back what a fixed window's plain-command charge
-- (fast.go) added to a count, when its answer did not stand (the marker
-- named another window, a binary state holds the key, or the window was
-- not the one holding Redis's time) or when it was denied (a denial
-- consumes nothing). Never below zero: a count that reaches it is deleted,
-- the same as an absent key (window.lua reads a missing count as 0).
--
-- KEYS[1]  the count's key;  KEYS[2]  the marker
-- ARGV[1]  what to take back (> 0)
-- ARGV[2]  the marker the charge set (it found none), or ""
-- ARGV[3]  the start of the charge's window (Unix ms) when the charge read
--          Redis's clock, or ""
--
-- A marker the charge set names no state when its window has not begun on
-- Redis's clock (the process's estimate of that clock was ahead): then it
-- goes, with its count (nothing else could have counted there). Beside a
-- binary state it stays: the script that decides the charge next reads
-- the binary state and, seeing the marker, writes the integer form.
local f, m = KEYS[1], KEYS[2]
if ARGV[2] ~= '' and ARGV[3] ~= '' and redis.call('GET', m) == ARGV[2] then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) < tonumber(ARGV[3]) then
    redis.call('DEL', m, f)
    return 2
  end
end
-- DECRBY keeps the expiry, and is exact where Lua's doubles are not (a
-- count plus an increment may pass 2^53).
if redis.call('EXISTS', f) == 0 then return 0 end
if redis.call('DECRBY', f, ARGV[1]) <= 0 then
  redis.call('DEL', f)
end
return 1

-- sluice redisstore: takes back what a fixed window's plain-command charge
-- (fast.go) added to a count, when its answer did not stand (the key
-- holds another window's count, another form of the state is there, or
-- the window was not the one holding Redis's time) or when it was denied
-- (a denial consumes nothing). Never below zero: a count that reaches it
-- is deleted, the same as an absent key.
--
-- KEYS[1]  the count's key;  KEYS[2]  the marker
-- ARGV[1]  what to take back (> 0)
-- ARGV[2]  the key's expiry (Unix ms) as the charge's transaction left
--          it, or "" for a count named by its marker (the marker form)
-- ARGV[3]  the marker the charge set on Redis's clock (it found none; the
--          marker form of the compatibility window), or ""
-- ARGV[4]  the start of that marker's window (Unix ms)
--
-- A marker the charge set names no state when its window has not begun on
-- Redis's clock (the process's estimate of that clock was ahead): then it
-- goes, with its count (nothing else could have counted there). Beside a
-- state in the key it stays: the script that decides the charge next
-- reads that state and, seeing the marker, writes the marker form.
--
-- A count whose expiry is no longer that one is another window's (the
-- key expired and a later charge made it again, or a script moved the
-- count to a window of another period): the increment is not in it, and
-- it is left alone. A script that made the key a binary state has read
-- the increment into it: left alone too.
local f, m = KEYS[1], KEYS[2]
if ARGV[3] ~= '' and redis.call('GET', m) == ARGV[3] then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) < tonumber(ARGV[4]) then
    redis.call('DEL', m, f)
    return 2
  end
end
if ARGV[2] ~= '' then
  if redis.call('PEXPIRETIME', f) ~= tonumber(ARGV[2]) then return 0 end
elseif redis.call('EXISTS', f) == 0 then
  return 0
end
-- DECRBY keeps the expiry, and is exact where Lua's doubles are not (a
-- count plus an increment may pass 2^53).
local left = redis.pcall('DECRBY', f, ARGV[1])
if type(left) == 'table' then return 0 end -- not an integer
if left <= 0 then redis.call('DEL', f) end
return 1

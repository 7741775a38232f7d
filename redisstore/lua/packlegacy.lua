-- sluice redisstore: the packed layout's legacy(i) (lua/legacy.lua's, for
-- lua/packed.lua): it reads states written under the compact string names
-- (keys.go) by a store of the string layout, until they expire. It comes
-- after the shape's file (tat.lua, wdead.lua: PER), before batch.lua.
--
-- ARGV ends as legacy.lua's does, but each request's entry is its
-- compact string name ("" for none), not its readable key: then the
-- prefix, the shape's tag and the number of requests, which this does not
-- read but the last. legacy(i), for a request whose field the script did
-- not find, moves the string state to the field (HSET, the hash's expiry
-- made at least the string's, DEL) and reports whether it moved one. A
-- window's state may be a fixed window's marker and integer count
-- instead (the string layout's plain-command form): legacy(i) reports it,
-- and window.lua reads it and writes the count to the field. A fixed
-- window's integer count in its one key (the string layout's on Redis's
-- clock) is moved as any state, and its expiry, which is its window's
-- end, kept in moved_at for window.lua (packed.lua's ptime).
local legacy
local moved_at = {}
do
  local nreq = tonumber(ARGV[#ARGV])
  local base = #ARGV - 3 - nreq
  local rcall = redis.call
  legacy = function(i)
    local old = ARGV[base + i]
    if old == '' then return false end
    local v = rcall('GET', old)
    if not v then return PER == 2 and rcall('EXISTS', KEYS[2 * i]) == 1 end
    local k = KEYS[(i - 1) * PER + 1]
    local h = string.sub(k, 1, #k - 8)
    local at = rcall('PEXPIRETIME', old)
    rcall('HSET', h, string.sub(k, #k - 7), v)
    moved_at[k] = at
    if at > 0 and rcall('PEXPIRETIME', h) < at then rcall('PEXPIREAT', h, at) end
    rcall('DEL', old)
    return true
  end
end

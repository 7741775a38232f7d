-- sluice redisstore: times as pairs (s, ns), ns in [0, 1e9), as
-- window.lua and prelude.lua (for log.lua) carry them; each script starts
-- with this file. Exact while |s| < 2^53/1953125 (146 years past the
-- epoch's year and more; 2·MaxWindow is 73), where s·1e9 is a multiple of
-- 512 below 2^62, exact too.
local E9, TWO53 = 1000000000, 9007199254740992

-- padd returns the pair a + b.
local function padd(as, ans, bs, bns)
  local s, ns = as + bs, ans + bns
  if ns >= E9 then return s + 1, ns - E9 end
  return s, ns
end

-- psub returns the pair a - b.
local function psub(as, ans, bs, bns)
  local s, ns = as - bs, ans - bns
  if ns < 0 then return s - 1, ns + E9 end
  return s, ns
end

-- less reports a < b.
local function less(as, ans, bs, bns)
  return as < bs or (as == bs and ans < bns)
end

-- pnum returns the double nearest to the pair's nanoseconds, as Go's
-- float64(int64) rounds it: s·1e9 is exact, so the sum rounds once.
local function pnum(s, ns)
  return s * E9 + ns
end

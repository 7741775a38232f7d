-- sluice redisstore: shared prelude of every script.
--
-- Lua numbers are IEEE doubles: integers are exact below 2^53. A time in
-- Unix nanoseconds (about 1.8e18) is not, so a time is carried as two
-- numbers, whole seconds s and nanoseconds ns in [0, 1e9), and stored as the
-- decimal int64 the Go steps use. Every duration the steps compute is below
-- 2^53 ns (ratelimit.Limit.Validate), so differences of times are exact.
--
-- Every script applies a batch of requests, one per key, in order:
-- ARGV[1] is the minimum expiry in milliseconds, then each request has F
-- arguments (F set by the script), the first two being now as seconds and
-- nanoseconds, or "" and "" for the server's clock (TIME, read once per
-- batch). Each request's step returns 7 integers; the script returns them
-- all, flattened.
local E9 = 1000000000
local fmod, floor = math.fmod, math.floor
local min_ttl = tonumber(ARGV[1])

-- parse reads a decimal int64 (possibly negative) as (s, ns).
local function parse(str)
  local neg = string.sub(str, 1, 1) == '-'
  if neg then str = string.sub(str, 2) end
  local len = #str
  local s, ns = 0, tonumber(str)
  if len > 9 then
    s = tonumber(string.sub(str, 1, len - 9))
    ns = tonumber(string.sub(str, len - 8))
  end
  if neg then
    if ns > 0 then s = -s - 1; ns = E9 - ns else s = -s end
  end
  return s, ns
end

-- format writes (s, ns) as a decimal int64.
local function format(s, ns)
  if s >= 0 then
    if s == 0 then return string.format('%d', ns) end
    return string.format('%d%09d', s, ns)
  end
  local as, ans = -s, ns
  if ans > 0 then as = as - 1; ans = E9 - ans end
  if as == 0 then return string.format('-%d', ans) end
  return string.format('-%d%09d', as, ans)
end

-- diff returns a - b in nanoseconds: exact when |a - b| < 2^53 (the
-- product is a multiple of 512 below 2^62, hence exact), monotone always.
local function diff(as, ans, bs, bns)
  return (as - bs) * E9 + (ans - bns)
end

-- add returns (s, ns) + d for an integer d with |d| <= 2^53, exactly.
local function add(s, ns, d)
  local q = floor(d / E9)
  local r = d - q * E9
  if r < 0 then q = q - 1; r = r + E9 elseif r >= E9 then q = q + 1; r = r - E9 end
  ns = ns + r
  if ns >= E9 then ns = ns - E9; q = q + 1 end
  return s + q, ns
end

-- less reports a < b.
local function less(as, ans, bs, bns)
  return as < bs or (as == bs and ans < bns)
end

-- idiv is integer division of a >= 0 by b > 0, exact for a, b < 2^53
-- (fmod is exact, and so is dividing an exact multiple).
local function idiv(a, b)
  return (a - fmod(a, b)) / b
end

-- pttl returns the expiry to set, in whole milliseconds, for state that
-- decays d nanoseconds from now: rounded up, and at least ARGV's minimum.
local function pttl(d, min_ms)
  local ms = idiv(d, 1000000)
  if fmod(d, 1000000) > 0 then ms = ms + 1 end
  if ms < min_ms then ms = min_ms end
  return ms
end

-- run applies step to every request of the batch.
local function run(F, step)
  local out, ts, tns = {}, nil, nil
  for i = 1, #KEYS do
    local o = 2 + (i - 1) * F
    local s, ns
    if ARGV[o] == '' then
      if not ts then
        local t = redis.call('TIME')
        ts, tns = tonumber(t[1]), tonumber(t[2]) * 1000
      end
      s, ns = ts, tns
    else
      s, ns = tonumber(ARGV[o]), tonumber(ARGV[o + 1])
    end
    local r = step(KEYS[i], s, ns, o + 2)
    for j = 1, 7 do out[#out + 1] = r[j] end
  end
  return out
end

-- sluice redisstore: the prelude of log.lua, after pairs.lua (gcra.lua and
-- window.lua stand alone, with batch.lua: they reply with less and derive
-- the rest in Go).
--
-- Lua numbers are IEEE doubles: integers are exact below 2^53. A time in
-- Unix nanoseconds (about 1.8e18) is not, so a time is carried as two
-- numbers, whole seconds s and nanoseconds ns in [0, 1e9), and stored as the
-- decimal int64 the Go steps use. Every duration the steps compute is below
-- 2^53 ns (ratelimit.Limit.Validate), so differences of times are exact;
-- except for windows longer than 2^53 ns (up to ratelimit.MaxWindow, 2^60
-- ns), whose durations log.lua carries as pairs (s, ns) too.
--
-- Every script applies a batch of requests, one per key, in order:
--
--   ARGV[1]  the minimum expiry, in milliseconds
--   ARGV[2]  "1" when each request carries its own now, "0" to read the
--            server's clock (TIME) once for the batch
--   ARGV[3]  the number of limit specs; then the specs, S fields each (S
--            and the fields are the script's)
--   then per request: its spec's index (from 1), its cost n and, when
--            ARGV[2] is "1", now as seconds and nanoseconds.
--
-- Each decision is returned as 4 integers {code, remaining, retry_after,
-- reset_after}, or 7 when code has bit 2 set: {…, delay, retry_x,
-- reset_x}, where the durations are retry_after + retry_x·unit and
-- reset_after + reset_x·unit, in two parts because a double cannot hold
-- every duration up to 2·MaxWindow (the unit is a second). Bit 1 of code
-- is "allowed".
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

-- pdur returns a pair >= 0 as a reply's two parts (d, x), d + x·1e9 ns:
-- (its nanoseconds, 0) when that is exact (below 2^53), else (ns, s).
local function pdur(s, ns)
  local d = s * E9 + ns
  if d < TWO53 then return d, 0 end
  return ns, s
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

-- ppttl is pttl for a pair.
local function ppttl(s, ns, min_ms)
  local ms = s * 1000 + idiv(ns, 1000000)
  if fmod(ns, 1000000) > 0 then ms = ms + 1 end
  if ms < min_ms then ms = min_ms end
  return ms
end

-- out is the reply being built, k its length.
local out, k = {}, 0

-- emit appends one decision.
local function emit(allowed, remaining, retry, reset, delay, rx, sx)
  if delay == 0 and rx == 0 and sx == 0 then
    out[k + 1], out[k + 2], out[k + 3], out[k + 4] = allowed, remaining, retry, reset
    k = k + 4
  else
    out[k + 1], out[k + 2], out[k + 3], out[k + 4] = allowed + 2, remaining, retry, reset
    out[k + 5], out[k + 6], out[k + 7] = delay, rx, sx
    k = k + 7
  end
end

-- Reads of string states: one MGET for the batch, then what the batch
-- itself wrote (a key may come several times in a batch).
local fetched, written = nil, {}

local function get(key, i)
  local v = written[key]
  if v == nil then v = fetched[i] end
  return v
end

local function set(key, v, px)
  written[key] = v
  redis.call('SET', key, v, 'PX', px)
end

-- run parses the S-field specs with prepare, then applies step to every
-- request of the batch (with i, its index in KEYS). With mget, the string
-- states of all the keys are read first, in one MGET.
local function run(S, prepare, step, mget)
  local specs, o = {}, 4
  for i = 1, tonumber(ARGV[3]) do
    specs[i] = prepare(o)
    o = o + S
  end
  if mget then fetched = redis.call('MGET', unpack(KEYS)) end
  local per_now, s, ns = ARGV[2] == '1', 0, 0
  if not per_now then
    local t = redis.call('TIME')
    s, ns = tonumber(t[1]), tonumber(t[2]) * 1000
  end
  for i = 1, #KEYS do
    local sp, n = specs[tonumber(ARGV[o])], tonumber(ARGV[o + 1])
    if per_now then
      s, ns = tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
      o = o + 4
    else
      o = o + 2
    end
    step(KEYS[i], i, s, ns, n, sp)
  end
  return out
end

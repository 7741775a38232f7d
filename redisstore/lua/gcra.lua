-- sluice redisstore: GCRA, TokenBucket and LeakyBucket (internal/gcra).
--
-- The script decides admission and keeps the state; the client derives the
-- rest of each decision from the backlog it returns, with the Go step
-- itself (gcra.StepCost), so that there is one implementation of the
-- numbers. The script runs on the hot path of every decision, and Redis
-- charges for each string and each conversion a script makes: it reads and
-- writes the state as 12 bytes, returns one integer a decision, and sets a
-- key's expiry only when it moves to a later second.
--
-- State: KEYS[i] holds the TAT as struct '<i8i4': whole seconds (Unix) and
-- nanoseconds in [0, 1e9). Lua numbers are doubles, exact below 2^53: a
-- time in Unix nanoseconds is not, so times are carried in two parts, and
-- every difference the script forms is exact.
--
-- Expiry: with the server's clock, a key expires (EXAT) at the first whole
-- second at or after its TAT, when its state has decayed to a full bucket
-- (the same as an absent key). A write that keeps the TAT within the same
-- second keeps the expiry (KEEPTTL): Redis's expiry bookkeeping costs about
-- as much as the write itself. With per-request times (Options.Now, not
-- Redis's clock) the expiry is relative, at least ARGV[1] ms.
--
-- ARGV[1]  the minimum expiry in milliseconds, with per-request times
-- ARGV[2]  "1" when each request carries its own now, "0" to read the
--          server's clock (TIME) once for the batch
-- ARGV[3]  P, the number of (inc, lim) pairs, then the P pairs:
--            inc  n·T, what an admitted request adds to the TAT (0: a peek,
--                 never written)
--            lim  the largest backlog admitted: τ − n·T, or a LeakyBucket's
--                 MaxDelay when that is less
-- then per request (KEYS[i], in order; a key may come more than once):
--          when P > 1, its pair's index (from 1); when ARGV[2] is "1", its
--          now as whole seconds and nanoseconds.
--
-- Reply, per request: its backlog b = max(TAT, now) − now before it, in
-- nanoseconds, as b when admitted (or peeked) and −b−1 when denied. A
-- backlog of 2^53 − 1 or more (the clock went back a long way), never
-- admitted, comes as three integers: −2^53, whole seconds, nanoseconds
-- (possibly negative).
local E9, TWO53 = 1000000000, 9007199254740992
local call, tonumber, floor = redis.call, tonumber, math.floor
local pack, unpack, format = struct.pack, struct.unpack, string.format

local per_now = ARGV[2] == '1'
local min_ttl = tonumber(ARGV[1])
local np = tonumber(ARGV[3])
local incs, lims, o = {}, {}, 4
for j = 1, np do
  incs[j], lims[j] = tonumber(ARGV[o]), tonumber(ARGV[o + 1])
  o = o + 2
end
local inc, lim = incs[1], lims[1]

local fetched = call('MGET', _G.unpack(KEYS))
local now_s, now_ns = 0, 0
if not per_now then
  local t = call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
end

-- written: the states this batch wrote, for keys that come again;
-- exat: the EXAT arguments formatted so far.
local written, exat, out, k = {}, {}, {}, 0
for i = 1, #KEYS do
  local key = KEYS[i]
  if np > 1 then
    local j = tonumber(ARGV[o])
    inc, lim = incs[j], lims[j]
    o = o + 1
  end
  if per_now then
    now_s, now_ns = tonumber(ARGV[o]), tonumber(ARGV[o + 1])
    o = o + 2
  end

  local v = written[key]
  if v == nil then v = fetched[i] end
  local tat_s, tat_ns, exp = 0, 0, 0
  if v then
    tat_s, tat_ns = unpack('<i8i4', v)
    exp = tat_s
    if tat_ns > 0 then exp = exp + 1 end
  end

  -- backlog = max(TAT, now) − now, from base = max(TAT, now).
  local base_s, base_ns, backlog = now_s, now_ns, 0
  if now_s < tat_s or (now_s == tat_s and now_ns < tat_ns) then
    base_s, base_ns = tat_s, tat_ns
    local bs, bns = tat_s - now_s, tat_ns - now_ns
    backlog = bs * E9 + bns -- exact below 2^53
    if backlog >= TWO53 - 1 then
      out[k + 1], out[k + 2], out[k + 3] = -TWO53, bs, bns
      k = k + 3
      backlog = -1
    end
  end

  if backlog < 0 then
    -- reported above: larger than any lim
  elseif inc == 0 then
    k = k + 1
    out[k] = backlog
  elseif backlog > lim then
    k = k + 1
    out[k] = -backlog - 1
  else
    -- TAT = base + inc, in seconds and nanoseconds (the quotient of a
    -- double division may be off by one; the remainder says so, exactly).
    local q = floor(inc / E9)
    local r = inc - q * E9
    if r < 0 then q, r = q - 1, r + E9 elseif r >= E9 then q, r = q + 1, r - E9 end
    local s, ns = base_s + q, base_ns + r
    if ns >= E9 then s, ns = s + 1, ns - E9 end
    v = pack('<i8i4', s, ns)
    written[key] = v
    if per_now then
      local ttl = backlog + inc
      local ms = floor(ttl / 1000000)
      if ms * 1000000 < ttl then ms = ms + 1 end
      if ms < min_ttl then ms = min_ttl end
      call('SET', key, v, 'PX', format('%d', ms))
    else
      local e = s
      if ns > 0 then e = e + 1 end
      if e == exp then
        call('SET', key, v, 'KEEPTTL')
      else
        local arg = exat[e]
        if not arg then
          arg = format('%d', e)
          exat[e] = arg
        end
        call('SET', key, v, 'EXAT', arg)
      end
    end
    k = k + 1
    out[k] = backlog
  end
end
return out

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
-- Storage: the state is read and written through batch.lua's fetch,
-- reread, setpx, del and expire: a string key each, or in the packed
-- layout a field of a hash (lua/packed.lua), the same bytes either way.
--
-- State: KEYS[i] holds the TAT and the emission interval T it was made
-- under: as struct '<I4I4I4' (12 bytes: whole seconds (Unix), T in
-- nanoseconds, nanoseconds in [0, 1e9)) when the seconds and T fit 32
-- bits (until 2106, intervals below 4.29 s), which redis-server keeps in
-- a 32-byte allocation; else as '<i8i4i8' (20 bytes, in 48: the seconds,
-- the nanoseconds, T). A 12-byte value whose bytes 4 to 7 are zero is
-- '<i8i4' (written before the interval was kept: its seconds' high half
-- is zero until 2106), of unknown interval (T is never zero). Lua numbers are doubles,
-- exact below 2^53: a time in Unix nanoseconds is not, so times are carried
-- in two parts, and every difference the script forms is exact.
--
-- Limit changes: a request whose T differs from the state's converts the
-- state first, as gcra.Convert does (the used events (TAT − now)/T_old
-- become as many of the new T, the fraction rounded up, at most 2^53 ns), and
-- writes it whatever the decision (a denial and a peek too), tagged with
-- the new T. A state of unknown interval is taken as made under the
-- request's.
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
-- ARGV[3]  P, the number of (inc, lim, T, τ) specs, then the P specs:
--            inc  n·T, what an admitted request adds to the TAT (0: a peek,
--                 written only to convert; negative: a refund of −inc)
--            lim  the largest backlog admitted: τ − n·T, or a LeakyBucket's
--                 MaxDelay when that is less
--            T    the emission interval, ns
--            τ    Burst·T, ns
-- then per request (KEYS[i], in order; a key may come more than once):
--          when P > 1, its pair's index (from 1); when ARGV[2] is "1", its
--          now as whole seconds and nanoseconds.
--
-- Reply, per request: its backlog b = max(TAT, now) − now before it, in
-- nanoseconds, as b when admitted (or peeked) and −b−1 when denied. A
-- backlog of 2^53 − 1 or more (the clock went back a long way), never
-- admitted, comes as three integers: −2^53, whole seconds, nanoseconds
-- (possibly negative).
local E9, TWO53, TWO32 = 1000000000, 9007199254740992, 4294967296
local floor, ceil, fmod = math.floor, math.ceil, math.fmod
local incs, lims, ts, taus, o = {}, {}, {}, {}, 4
for j = 1, np do
  incs[j], lims[j], ts[j], taus[j] = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  o = o + 4
end
local inc, lim, t, tau = incs[1], lims[1], ts[1], taus[1]

-- addns returns (s, ns) + d for an integer d, |d| <= 2^53, exactly (the
-- quotient of a double division may be off by one; the remainder says
-- so, exactly).
local function addns(s, ns, d)
  local q = floor(d / E9)
  local r = d - q * E9
  if r < 0 then q, r = q - 1, r + E9 elseif r >= E9 then q, r = q + 1, r - E9 end
  s, ns = s + q, ns + r
  if ns >= E9 then s, ns = s + 1, ns - E9 end
  return s, ns
end

local fetched = fetch()
local now_s, now_ns = 0, 0
if not per_now then
  local t = call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
end

-- written: the states this batch wrote, for keys that come again.
local written, out, k = {}, {}, 0
for i = 1, #KEYS do
  local key = KEYS[i]
  if np > 1 then
    local j = tonumber(ARGV[o])
    inc, lim, t, tau = incs[j], lims[j], ts[j], taus[j]
    o = o + 1
  end
  if per_now then now_s, now_ns, o = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), o + 2 end

  local v = written[key]
  if v == nil then
    v = fetched[i]
    if not v and legacy(i) then v = reread(key) end -- lua/legacy.lua
  end
  local tat_s, tat_ns, exp, iv = 0, 0, 0, t
  if v then
    if #v >= 20 then
      tat_s, tat_ns, iv = unpack('<i8i4i8', v)
    else
      tat_s, iv, tat_ns = unpack('<I4I4I4', v) -- iv 0: '<i8i4'
    end
    exp = tat_s
    if tat_ns > 0 then exp = exp + 1 end
  end

  -- Made under another interval: convert (gcra.Convert), and write below.
  local convert = v and iv ~= t
  if convert then
    exp = -1 -- the expiry moves
    if iv > 0 and (now_s < tat_s or (now_s == tat_s and now_ns < tat_ns)) then
      local b = (tat_s - now_s) * E9 + (tat_ns - now_ns) -- exact below 2^53
      if b < TWO53 then
        local r = fmod(b, iv)
        local q = (b - r) / iv
        local nb = TWO53
        local qa = TWO53 - t
        if q <= (qa - fmod(qa, t)) / t then
          nb = q * t
          if r > 0 then nb = nb + ceil(r * t / iv) end
          if nb > TWO53 then nb = TWO53 end
        end
        tat_s, tat_ns = addns(now_s, now_ns, nb)
      end
    end
  end

  -- A refund (inc < 0, ratelimit.Request.Refund): the backlog shrinks by
  -- −inc, down to none (gcra.Refund); then it is answered as a peek.
  local refunded = false
  if inc < 0 and (now_s < tat_s or (now_s == tat_s and now_ns < tat_ns)) then
    if (tat_s - now_s) * E9 + (tat_ns - now_ns) <= -inc then
      tat_s, tat_ns = now_s, now_ns
    else
      tat_s, tat_ns = addns(tat_s, tat_ns, inc)
    end
    refunded = true
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

  local write = false
  if backlog < 0 then
    -- reported above: larger than any lim
    write = convert or refunded
  elseif inc <= 0 then
    k = k + 1
    out[k] = backlog
    write = convert or refunded
  elseif backlog > lim then
    k = k + 1
    out[k] = -backlog - 1
    write = convert
  else
    tat_s, tat_ns = addns(base_s, base_ns, inc)
    write = true
    k = k + 1
    out[k] = backlog
  end
  if write then
    if tat_s >= 0 and tat_s < TWO32 and t < TWO32 then
      v = pack('<I4I4I4', tat_s, t, tat_ns)
    else
      v = pack('<i8i4i8', tat_s, tat_ns, t)
    end
    written[key] = v
    local e = tat_s -- the whole second at or after the TAT
    if tat_ns > 0 then e = e + 1 end
    if per_now then
      local ttl = 0
      if now_s < tat_s or (now_s == tat_s and now_ns < tat_ns) then
        ttl = (tat_s - now_s) * E9 + (tat_ns - now_ns)
      end
      local ms = floor(ttl / 1000000)
      if ms * 1000000 < ttl then ms = ms + 1 end
      if ms < min_ttl then ms = min_ttl end
      setpx(key, v, ms, now_s, now_ns)
    elseif e <= now_s then
      -- Full: the same as an absent key.
      del(key)
      written[key] = false
    else
      expire(key, v, e, exp, now_s, now_ns)
    end
  end
end
return out

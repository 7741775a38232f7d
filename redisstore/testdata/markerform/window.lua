-- sluice redisstore: FixedWindow and SlidingWindowCounter (internal/window).
--
-- The script decides admission and keeps the counters; the client derives
-- the rest of each decision (remaining, retry and reset times) from the
-- counters it returns, with the Go steps themselves (window.Fixed and
-- window.Sliding), so that there is one implementation of the numbers. As
-- gcra.lua, it reads and writes the state in binary, returns one or two
-- integers a decision, and sets a key's expiry only when it moves to a
-- later second.
--
-- Storage: as gcra.lua's, through batch.lua's functions (a field of a
-- hash in the packed layout, lua/packed.lua, which has no integer form).
--
-- State: KEYS[i] holds struct '<i8i4i8i8i8i8i4': the current window's
-- start (whole seconds, Unix, and nanoseconds in [0, 1e9)), prev and curr
-- (the counts of the previous and current windows), the whole second at
-- which the key expires (0 when its expiry is relative, with per-request
-- times), and the period the counts were made in (seconds, nanoseconds);
-- in 28 bytes, the same seven fields as '<I4I4I4I4I4I4I4', when each fits
-- 32 bits (times until 2106, counts below 2^32, periods below 136 years),
-- which redis-server keeps in a 48-byte allocation rather than 80. A
-- 36-byte value (written before the period was kept) has an unknown
-- period, taken as the request's.
--
-- Limit changes: a request whose period differs from the state's moves the
-- counts into its own windows first, as window.Rescale does, and writes
-- them whatever the decision (a denial and a peek too). Lua numbers are doubles, exact below 2^53: a time in Unix
-- nanoseconds is not, so times are carried in two parts, and so are
-- periods longer than 2^53 ns (up to ratelimit.MaxWindow, 2^60 ns).
--
-- Expiry: with the server's clock, a key expires (EXAT) at the first whole
-- second at or after its state has decayed (window.State.Expiry: the end of
-- the current window, or of the next for the sliding counter). A write that
-- keeps that second keeps the expiry (KEEPTTL); the second is in the state,
-- so that keys shared by limits of other periods stay right. With
-- per-request times (Options.Now, not Redis's clock) the expiry is
-- relative, at least ARGV[1] ms.
--
-- ARGV[1]  the minimum expiry in milliseconds, with per-request times
-- ARGV[2]  "1" when each request carries its own now, "0" to read the
--          server's clock (TIME) once for the batch
-- ARGV[3]  P, the number of specs, then the P specs, 5 fields each:
--          rate, the period as whole seconds and nanoseconds, "1" for the
--          sliding counter ("0": fixed window), and the cost n (0: a peek;
--          negative: a refund of −n, at most 2^53)
-- then per request (KEYS[i], in order; a key may come more than once):
--          when P > 1, its spec's index (from 1); when ARGV[2] is "1", its
--          now as whole seconds and nanoseconds.
--
-- Reply: with the server's clock, first its now, as seconds and
-- nanoseconds. Then per request, the counts it was decided on, in the
-- window holding now (the state after the roll, before the request): for
-- the sliding counter prev first; then curr as c when admitted (or peeked)
-- and −c−1 when denied. When that window is not the one holding now (the
-- clock went back into an earlier window: the newest one stays current),
-- or c is 2^53 − 1 or more, curr comes as four integers instead: −2^53,
-- the window's start (seconds, nanoseconds), 1 when admitted (else 0), c.
local floor, fmod = math.floor, math.fmod

-- start returns the start of the window of period w (w_s, w_ns; wn its
-- nanoseconds, exact when w <= 2^53) holding now.
local function start(now_s, now_ns, w_s, w_ns, wn, long)
  if not long then
    -- now mod w, exactly: fmod is exact, and fmod(now_s, w)·1e9 is a
    -- multiple of 512 below 2^62 (until 2112).
    local x = fmod(fmod(now_s, wn) * E9, wn)
    local y = fmod(now_ns, wn)
    local m
    if x <= 0 then
      m = x + y
    elseif y >= wn - x then
      m = y - (wn - x)
    else
      m = x + y
    end
    if m < 0 then m = m + wn end
    local q = floor(m / E9)
    local r = m - q * E9
    if r < 0 then q, r = q - 1, r + E9 elseif r >= E9 then q, r = q + 1, r - E9 end
    return psub(now_s, now_ns, q, r)
  end
  -- w > 2^53: q is floor(now / w) give or take one (|q| < 2^10), so q·w
  -- is an exact pair; then correct.
  local q = floor(pnum(now_s, now_ns) / wn)
  local qns = q * w_ns
  local carry = floor(qns / E9)
  local m_s, m_ns = psub(now_s, now_ns, q * w_s + carry, 0)
  m_s, m_ns = psub(m_s, m_ns, 0, qns - carry * E9)
  while m_s < 0 do m_s, m_ns = padd(m_s, m_ns, w_s, w_ns) end
  while not less(m_s, m_ns, w_s, w_ns) do m_s, m_ns = psub(m_s, m_ns, w_s, w_ns) end
  return psub(now_s, now_ns, m_s, m_ns)
end

-- roll returns the counts (prev, curr) of a state that starts at st and
-- counts prev and curr in windows of period w, as of the window that
-- starts at ws: the same, when ws is st or (back true) earlier, time having
-- gone back (the state stays the newest); curr as the previous count when
-- ws is the next window; none when later (algorithm/window's roll).
local function roll(ws_s, ws_ns, st_s, st_ns, prev, curr, w_s, w_ns)
  if less(ws_s, ws_ns, st_s, st_ns) then return prev, curr, true end
  if ws_s == st_s and ws_ns == st_ns then return prev, curr, false end
  local nx_s, nx_ns = padd(st_s, st_ns, w_s, w_ns)
  if ws_s == nx_s and ws_ns == nx_ns then return curr, 0, false end
  return 0, 0, false
end

-- wpack packs a state: in 28 bytes when every field fits 32 bits (the
-- nanoseconds always do), else in 48.
local TWO32 = 4294967296
local function wpack(st_s, st_ns, prev, curr, exp, w_s, w_ns)
  if st_s >= 0 and st_s < TWO32 and prev < TWO32 and curr < TWO32 and exp < TWO32 and w_s < TWO32 then
    return pack('<I4I4I4I4I4I4I4', st_s, st_ns, prev, curr, exp, w_s, w_ns)
  end
  return pack('<i8i4i8i8i8i8i4', st_s, st_ns, prev, curr, exp, w_s, w_ns)
end

-- A spec: {rate, w_s, w_ns, wn, long, sliding, n}, and, with the server's
-- clock, the start of the window holding now, once found.
local specs, o = {}, 4
for j = 1, np do
  local w_s, w_ns = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local long = less(9007199, 254740992, w_s, w_ns)
  specs[j] = {tonumber(ARGV[o]), w_s, w_ns, pnum(w_s, w_ns), long, ARGV[o + 3] == '1', tonumber(ARGV[o + 4])}
  o = o + 5
end
local sp = specs[1]

-- written: what this batch wrote (false: deleted), for keys that come
-- again.
local written = {}
local fetched = fetch()
-- fget returns the integer count at key k (0 when absent), as this batch
-- left it.
local function fget(k)
  local x = written[k]
  if x == nil then x = call('GET', k) end
  if not x then return 0 end
  return tonumber(x)
end
local now_s, now_ns = 0, 0
local out, k = {}, 0
if not per_now then
  local t = call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
  out[1], out[2] = now_s, now_ns
  k = 2
end

for i = 1, #KEYS / 2 do
  local key, mkey = KEYS[2 * i - 1], KEYS[2 * i]
  if np > 1 then
    sp = specs[tonumber(ARGV[o])]
    o = o + 1
  end
  if per_now then now_s, now_ns, o = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), o + 2 end
  local rate, w_s, w_ns, wn, long, sliding, n = sp[1], sp[2], sp[3], sp[4], sp[5], sp[6], sp[7]

  local ws_s, ws_ns
  if per_now then
    ws_s, ws_ns = start(now_s, now_ns, w_s, w_ns, wn, long)
  else
    ws_s, ws_ns = sp[8], sp[9]
    if not ws_s then
      ws_s, ws_ns = start(now_s, now_ns, w_s, w_ns, wn, long)
      sp[8], sp[9] = ws_s, ws_ns
    end
  end

  local v = written[key]
  if v == nil then v = fetched[2 * i - 1] end
  local mv = written[mkey]
  if mv == nil then mv = fetched[2 * i] end
  -- No binary state (a plain-command charge may have set a marker beside
  -- the readable names' state): lua/legacy.lua.
  if not v and written[key] == nil and legacy(i) then
    v, mv = reread(key), call('GET', mkey)
  end
  -- A fixed window of whole milliseconds keeps its count as an integer
  -- (l2), so that a lone request can go as plain commands; not in the
  -- packed layout (lua/packed.lua), which has none.
  local l2 = integers and not sliding and fmod(w_ns, 1000000) == 0
  local st_s, st_ns, prev, curr, exp, pw_s, pw_ns = 0, 0, 0, 0, 0, w_s, w_ns
  -- cur: the marker when it holds the state. A marker beside a binary
  -- state was set by a plain-command charge that its undo is taking back
  -- (fast.go): the binary state holds.
  local have, fold, cur = false, nil, nil
  if mv then fold = mkey .. ':' .. mv end
  if mv and not v then
    -- The integer form: the marker names the window ("period:start", in
    -- ms) and the count's key (marker key .. ":" .. marker).
    cur = mv
    local colon = string.find(mv, ':', 1, true)
    local pms, sms = tonumber(string.sub(mv, 1, colon - 1)), tonumber(string.sub(mv, colon + 1))
    local cnt = fget(fold)
    if cnt > 0 then
      have, exp = true, -1
      st_s = floor(sms / 1000)
      st_ns = (sms - st_s * 1000) * 1000000
      pw_s = floor(pms / 1000)
      pw_ns = (pms - pw_s * 1000) * 1000000
      curr = cnt
    end
  elseif v then
    have = true
    if #v == 28 then
      st_s, st_ns, prev, curr, exp, pw_s, pw_ns = unpack('<I4I4I4I4I4I4I4', v)
    elseif #v >= 48 then
      st_s, st_ns, prev, curr, exp, pw_s, pw_ns = unpack('<i8i4i8i8i8i8i4', v)
    else
      st_s, st_ns, prev, curr, exp = unpack('<i8i4i8i8i8', v)
    end
  end

  -- Counted in windows of another period: window.Rescale.
  local rescaled = false
  if have and (pw_s ~= w_s or pw_ns ~= w_ns) then
    rescaled, exp = true, -1
    -- Roll in the old windows first.
    local os_s, os_ns = start(now_s, now_ns, pw_s, pw_ns, pnum(pw_s, pw_ns), less(9007199, 254740992, pw_s, pw_ns))
    local rp, rc, went_back = roll(os_s, os_ns, st_s, st_ns, prev, curr, pw_s, pw_ns)
    local rs_s, rs_ns, en_s, en_ns = os_s, os_ns, now_s, now_ns
    if went_back then rs_s, rs_ns, en_s, en_ns = st_s, st_ns, st_s, st_ns end
    if not sliding then rp = 0 end
    -- Then each count where its latest event falls in the new windows.
    local ns_s, ns_ns = start(en_s, en_ns, w_s, w_ns, wn, long)
    local np, nc = 0, rc
    if rp > 0 then
      if less(ns_s, ns_ns, rs_s, rs_ns) then
        nc = nc + rp
        if nc > TWO53 then nc = TWO53 end
      else
        local b_s, b_ns = psub(ns_s, ns_ns, w_s, w_ns)
        if less(b_s, b_ns, rs_s, rs_ns) then np = rp end
      end
    end
    st_s, st_ns, prev, curr = ns_s, ns_ns, np, nc
    if np == 0 and nc == 0 then st_s, st_ns = 0, 0 end
  end

  -- Roll to the window holding now; time that went back into an earlier
  -- window stays in the newest one, at its start.
  local s_s, s_ns, p, c, e_s, e_ns, back = ws_s, ws_ns, 0, 0, now_s, now_ns, false
  if st_s ~= 0 or st_ns ~= 0 or prev ~= 0 or curr ~= 0 then -- not absent
    p, c, back = roll(ws_s, ws_ns, st_s, st_ns, prev, curr, w_s, w_ns)
    if back then s_s, s_ns, e_s, e_ns = st_s, st_ns, st_s, st_ns end
  end

  -- A refund (n < 0, ratelimit.Request.Refund): −n back, from the
  -- current window's count first, then the previous one's for the sliding
  -- counter (window.Refund); then it is answered as a peek.
  local refunded = false
  if n < 0 and (c > 0 or (sliding and p > 0)) then
    local take = -n
    if take > c then take = c end
    c = c - take
    if sliding then
      local rest = -n - take
      if rest > p then rest = p end
      p = p - rest
    end
    refunded = true
  end

  local admit = true
  if n > 0 then
    if sliding then
      -- The estimate, in window.Sliding's order and doubles.
      local el_s, el_ns = psub(e_s, e_ns, s_s, s_ns)
      local x_s, x_ns = psub(w_s, w_ns, el_s, el_ns)
      local est = p * pnum(x_s, x_ns) / wn
      admit = est + c + n <= rate
    else
      -- n > rate − c, not c + n > rate: the sum may pass 2^53.
      admit = n <= rate - c
    end
  end

  if sliding then
    k = k + 1
    out[k] = p
  end
  if back or c >= TWO53 - 1 then
    out[k + 1], out[k + 2], out[k + 3], out[k + 5] = -TWO53, s_s, s_ns, c
    if admit then out[k + 4] = 1 else out[k + 4] = 0 end
    k = k + 5
  elseif admit then
    k = k + 1
    out[k] = c
  else
    k = k + 1
    out[k] = -c - 1
  end

  if (admit and n > 0) or rescaled or refunded then
    local add = 0
    if admit and n > 0 then add = n end
    if not sliding then p = 0 end
    if p == 0 and c + add == 0 then
      -- Nothing counted: the same as an absent key.
      del(key)
      written[key] = false
      if mv then
        call('DEL', mkey, fold)
        written[mkey], written[fold] = false, false
      end
    elseif l2 and mv then
      -- The integer form, for a key that has a marker (plain-command
      -- charges use the key); others keep the binary form, one write. The
      -- count's key may hold increments of plain-command charges that
      -- found another window named and are being undone (undo.lua): they
      -- are kept, so that the undo takes them back.
      local sms = s_s * 1000 + s_ns / 1000000
      local mval = format('%d:%d', w_s * 1000 + w_ns / 1000000, sms)
      local fkey = mkey .. ':' .. mval
      local cnt = c + add
      if mval ~= cur then
        cnt = cnt + fget(fkey)
        if mv and fold ~= fkey then
          call('DEL', fold)
          written[fold] = false
        end
        if v then
          call('DEL', key)
          written[key] = false
        end
      end
      written[fkey] = cnt
      if per_now then
        local x_s, x_ns = padd(s_s, s_ns, w_s, w_ns)
        local d_s, d_ns = psub(x_s, x_ns, e_s, e_ns)
        local ms = d_s * 1000 + floor(d_ns / 1000000)
        if fmod(d_ns, 1000000) > 0 then ms = ms + 1 end
        if ms < min_ttl then ms = min_ttl end
        local px = format('%d', ms)
        call('SET', fkey, format('%d', cnt), 'PX', px)
        if mval ~= cur then call('SET', mkey, mval, 'PX', px) end
      else
        -- Expired from the window's last millisecond on: Redis keeps a key
        -- until its clock passes the expiry.
        if mval == cur and have then
          call('SET', fkey, format('%d', cnt), 'KEEPTTL')
        else
          local at = format('%d', sms + w_s * 1000 + w_ns / 1000000 - 1)
          call('SET', fkey, format('%d', cnt), 'PXAT', at)
          call('SET', mkey, mval, 'PXAT', at)
        end
      end
      written[mkey] = mval
    else
      if mv then
        call('DEL', mkey, fold)
        written[mkey], written[fold] = false, false
      end
      -- The key's state decays at the end of the window (fixed), or of
      -- the next (sliding): then it is the same as an absent key.
      local x_s, x_ns = padd(s_s, s_ns, w_s, w_ns)
      if sliding then
        x_s, x_ns = padd(x_s, x_ns, w_s, w_ns)
      end
      if per_now then
        local d_s, d_ns = psub(x_s, x_ns, e_s, e_ns)
        local ms = d_s * 1000 + floor(d_ns / 1000000)
        if fmod(d_ns, 1000000) > 0 then ms = ms + 1 end
        if ms < min_ttl then ms = min_ttl end
        v = wpack(s_s, s_ns, p, c + add, 0, w_s, w_ns)
        written[key] = v
        setpx(key, v, ms, now_s, now_ns)
      else
        local e = x_s
        if x_ns > 0 then e = e + 1 end
        v = wpack(s_s, s_ns, p, c + add, e, w_s, w_ns)
        written[key] = v
        expire(key, v, e, exp, now_s, now_ns)
      end
    end
  end
end
return out

-- FixedWindow and SlidingWindowCounter: internal/window.Fixed and Sliding.
-- KEYS[i]: "start prev curr", start a decimal int64 of Unix nanoseconds.
-- Spec (S = 3): rate, w (the Period, ns), sliding (0|1). The unit of the
-- two-part durations is w (2·w may pass 2^53); for w > 2^53, a second.
local function prepare(o)
  local sp = {tonumber(ARGV[o]), tonumber(ARGV[o + 1]), ARGV[o + 2] == '1'}
  -- Longer than 2^53 ns (16 digits or more): long_step, w as a pair.
  if #ARGV[o + 1] >= 16 then
    local s, ns = parse(ARGV[o + 1])
    if less(9007199, 254740992, s, ns) then sp[4], sp[5] = s, ns end
  end
  return sp
end

-- long_step is step for w > 2^53 ns (up to ratelimit.MaxWindow): the same
-- decisions, with w and every time and duration as pairs (s, ns), exact;
-- the estimate's doubles are Go's (pnum rounds as float64(int64) does).
-- Durations are replied as (ns, s), their unit a second.
local function long_step(key, now_s, now_ns, n, sp, st_s, st_ns, prev, curr)
  local rate, sliding, w_s, w_ns = sp[1], sp[3], sp[4], sp[5]
  local wf = pnum(w_s, w_ns)

  -- now mod w: q is floor(now / w) give or take one (|q| < 2^10 since
  -- w > 2^53), so q·w is an exact pair; then correct.
  local q = floor(pnum(now_s, now_ns) / wf)
  local qns = q * w_ns
  local carry = floor(qns / E9)
  local m_s, m_ns = psub(now_s, now_ns, q * w_s + carry, 0)
  m_s, m_ns = psub(m_s, m_ns, 0, qns - carry * E9)
  while m_s < 0 do m_s, m_ns = padd(m_s, m_ns, w_s, w_ns) end
  while not less(m_s, m_ns, w_s, w_ns) do m_s, m_ns = psub(m_s, m_ns, w_s, w_ns) end
  local ws_s, ws_ns = psub(now_s, now_ns, m_s, m_ns)

  local ns_s, ns_ns, nprev, ncurr = st_s, st_ns, prev, curr
  if st_s == 0 and st_ns == 0 and prev == 0 and curr == 0 then
    ns_s, ns_ns = ws_s, ws_ns
  elseif less(ws_s, ws_ns, st_s, st_ns) then
    now_s, now_ns = st_s, st_ns
  elseif ws_s == st_s and ws_ns == st_ns then
    -- same window
  else
    local nx_s, nx_ns = padd(st_s, st_ns, w_s, w_ns)
    if ws_s == nx_s and ws_ns == nx_ns then
      nprev, ncurr = curr, 0
    else
      nprev, ncurr = 0, 0
    end
    ns_s, ns_ns = ws_s, ws_ns
  end
  local e_s, e_ns = psub(now_s, now_ns, ns_s, ns_ns)

  local function save(t_s, t_ns)
    set(key, format(ns_s, ns_ns) .. ' ' .. string.format('%d %d', nprev, ncurr), ppttl(t_s, t_ns, min_ttl))
  end

  if not sliding then
    local u_s, u_ns = psub(w_s, w_ns, e_s, e_ns)
    local ud, ux = pdur(u_s, u_ns)
    local rd, rx = 0, 0
    if ncurr > 0 then rd, rx = ud, ux end
    local rem = rate - ncurr
    if rem < 0 then rem = 0 end
    if n == 0 then return emit(1, rem, 0, rd, 0, 0, rx) end
    if n > rate - ncurr then return emit(0, rem, ud, rd, 0, ux, rx) end
    nprev, ncurr = 0, ncurr + n
    save(u_s, u_ns)
    return emit(1, rate - ncurr, 0, ud, 0, 0, ux)
  end

  local function used(p, c, s, ns)
    local x_s, x_ns = psub(w_s, w_ns, s, ns)
    local est = p * pnum(x_s, x_ns) / wf
    return est + c
  end
  local function admits(p, c, s, ns)
    return used(p, c, s, ns) + n <= rate
  end
  local l_s, l_ns = psub(w_s, w_ns, 0, 1) -- w - 1
  local w2_s, w2_ns = padd(w_s, w_ns, w_s, w_ns) -- 2·w
  local function earliest(p, c, f_s, f_ns)
    if not admits(p, c, l_s, l_ns) then return nil end
    local lo_s, lo_ns, hi_s, hi_ns = f_s, f_ns, l_s, l_ns
    while less(lo_s, lo_ns, hi_s, hi_ns) do
      local d_s, d_ns = psub(hi_s, hi_ns, lo_s, lo_ns)
      local h_s = floor(d_s / 2)
      local mid_s, mid_ns = padd(lo_s, lo_ns, h_s, floor(((d_s - 2 * h_s) * E9 + d_ns) / 2))
      if admits(p, c, mid_s, mid_ns) then
        hi_s, hi_ns = mid_s, mid_ns
      else
        lo_s, lo_ns = padd(mid_s, mid_ns, 0, 1)
      end
    end
    return lo_s, lo_ns
  end
  local function remaining(p, c)
    local r = floor(rate - used(p, c, e_s, e_ns))
    if r < 0 then return 0 end
    return r
  end
  local function reset(p, c)
    if c > 0 then return psub(w2_s, w2_ns, e_s, e_ns) end
    if p > 0 then return psub(w_s, w_ns, e_s, e_ns) end
    return 0, 0
  end

  local rem = remaining(nprev, ncurr)
  local t_s, t_ns = reset(nprev, ncurr)
  local rd, rx = pdur(t_s, t_ns)
  if n == 0 then return emit(1, rem, 0, rd, 0, 0, rx) end
  if not admits(nprev, ncurr, e_s, e_ns) then
    local r_s, r_ns
    local f_s, f_ns = earliest(nprev, ncurr, e_s, e_ns)
    if f_s then
      r_s, r_ns = psub(f_s, f_ns, e_s, e_ns)
    else
      f_s, f_ns = earliest(ncurr, 0, 0, 0)
      if f_s then
        r_s, r_ns = padd(f_s, f_ns, psub(w_s, w_ns, e_s, e_ns))
      else
        r_s, r_ns = psub(w2_s, w2_ns, e_s, e_ns)
      end
    end
    local d, x = pdur(r_s, r_ns)
    return emit(0, rem, d, rd, 0, x, rx)
  end
  ncurr = ncurr + n
  rem = remaining(nprev, ncurr)
  t_s, t_ns = reset(nprev, ncurr)
  rd, rx = pdur(t_s, t_ns)
  save(t_s, t_ns)
  return emit(1, rem, 0, rd, 0, 0, rx)
end

local function step(key, i, now_s, now_ns, n, sp)
  local rate, w, sliding = sp[1], sp[2], sp[3]

  local st_s, st_ns, prev, curr = 0, 0, 0, 0
  local v = get(key, i)
  if v then
    local a, b, c = string.match(v, '^(%-?%d+) (%d+) (%d+)$')
    st_s, st_ns = parse(a)
    prev, curr = tonumber(b), tonumber(c)
  end
  if sp[4] then return long_step(key, now_s, now_ns, n, sp, st_s, st_ns, prev, curr) end

  -- now mod w, for now = now_s·1e9 + now_ns, exactly: fmod is exact, and
  -- fmod(now_s, w)·1e9 is a multiple of 512 below 2^62 (until 2112).
  local x = fmod(fmod(now_s, w) * E9, w)
  local y = fmod(now_ns, w)
  local m
  if x <= 0 then
    m = x + y
  elseif y >= w - x then
    m = y - (w - x)
  else
    m = x + y
  end
  if m < 0 then m = m + w end
  local ws_s, ws_ns = add(now_s, now_ns, -m)

  -- roll to the window holding now; time that went back into an earlier
  -- window stays in the newest one, at its start.
  local ns_s, ns_ns, nprev, ncurr = st_s, st_ns, prev, curr
  if st_s == 0 and st_ns == 0 and prev == 0 and curr == 0 then
    ns_s, ns_ns = ws_s, ws_ns
  elseif less(ws_s, ws_ns, st_s, st_ns) then
    now_s, now_ns = st_s, st_ns
  elseif ws_s == st_s and ws_ns == st_ns then
    -- same window
  else
    local nx_s, nx_ns = add(st_s, st_ns, w)
    if ws_s == nx_s and ws_ns == nx_ns then
      nprev, ncurr = curr, 0
    else
      nprev, ncurr = 0, 0
    end
    ns_s, ns_ns = ws_s, ws_ns
  end
  local elapsed = diff(now_s, now_ns, ns_s, ns_ns)

  local function save(ttl_ns)
    set(key, format(ns_s, ns_ns) .. ' ' .. string.format('%d %d', nprev, ncurr), pttl(ttl_ns, min_ttl))
  end

  if not sliding then
    local until_end = w - elapsed
    local reset = 0
    if ncurr > 0 then reset = until_end end
    local rem = rate - ncurr
    if rem < 0 then rem = 0 end
    if n == 0 then return emit(1, rem, 0, reset, 0, 0, 0) end
    -- n > rate − curr, not curr + n > rate: the sum may pass 2^53.
    if n > rate - ncurr then return emit(0, rem, until_end, reset, 0, 0, 0) end
    nprev, ncurr = 0, ncurr + n
    save(until_end)
    return emit(1, rate - ncurr, 0, until_end, 0, 0, 0)
  end

  local function used(p, c, e)
    local est = p * (w - e) / w
    return est + c
  end
  local function admits(p, c, e)
    return used(p, c, e) + n <= rate
  end
  local function earliest(p, c, from)
    if not admits(p, c, w - 1) then return nil end
    local lo, hi = from, w - 1
    while lo < hi do
      local mid = lo + floor((hi - lo) / 2)
      if admits(p, c, mid) then hi = mid else lo = mid + 1 end
    end
    return lo
  end
  local function remaining(p, c)
    local r = floor(rate - used(p, c, elapsed))
    if r < 0 then return 0 end
    return r
  end
  -- durations as (d, x): d + x·w, folded into d when that is exact.
  local function fold(d, x)
    if x > 0 and w <= TWO53 / 4 then return d + x * w, 0 end
    return d, x
  end
  local function reset(p, c)
    if c > 0 then return fold(w - elapsed, 1) end
    if p > 0 then return w - elapsed, 0 end
    return 0, 0
  end

  local rem = remaining(nprev, ncurr)
  local ra, rx = reset(nprev, ncurr)
  if n == 0 then return emit(1, rem, 0, ra, 0, 0, rx) end
  if not admits(nprev, ncurr, elapsed) then
    local e = earliest(nprev, ncurr, elapsed)
    if e then return emit(0, rem, e - elapsed, ra, 0, 0, rx) end
    local d, x
    e = earliest(ncurr, 0, 0)
    if e then d, x = fold(e - elapsed, 1) else d, x = fold(-elapsed, 2) end
    return emit(0, rem, d, ra, 0, x, rx)
  end
  ncurr = ncurr + n
  rem = remaining(nprev, ncurr)
  ra, rx = reset(nprev, ncurr)
  save(ra + rx * w)
  return emit(1, rem, 0, ra, 0, 0, rx)
end

return run(3, prepare, step, true)

-- GCRA, TokenBucket and LeakyBucket: internal/gcra.Step.
-- KEYS[i]: the TAT, a decimal int64 of Unix nanoseconds.
-- Spec (S = 4): t (the interval, ns), tau (Burst·t, ns), leaky (0|1),
-- max_delay (ns, 0 = none). The unit of the two-part durations is a second.
local function prepare(o)
  return {tonumber(ARGV[o]), tonumber(ARGV[o + 1]), ARGV[o + 2] == '1', tonumber(ARGV[o + 3])}
end

local function remaining(ttl, t, tau)
  if ttl >= tau then return 0 end
  return idiv(tau - ttl, t)
end

local function step(key, i, now_s, now_ns, n, sp)
  local t, tau, leaky, max_delay = sp[1], sp[2], sp[3], sp[4]

  local tat_s, tat_ns = 0, 0
  local v = get(key, i)
  if v then tat_s, tat_ns = parse(v) end

  -- backlog = max(tat, now) − now. After the clock went back it may pass
  -- 2^53; the durations derived from it are then returned in two parts,
  -- bs seconds and the rest.
  local base_s, base_ns, bs, bns = now_s, now_ns, 0, 0
  if less(now_s, now_ns, tat_s, tat_ns) then
    base_s, base_ns, bs, bns = tat_s, tat_ns, tat_s - now_s, tat_ns - now_ns
  end
  local backlog = bs * E9 + bns
  if backlog < TWO53 then bs, bns = 0, backlog end

  if n == 0 then
    return emit(1, remaining(backlog, t, tau), 0, bns, 0, 0, bs)
  end
  -- backlog + n·t may pass 2^53: compare and subtract without forming it.
  local slack = tau - n * t
  if backlog > slack then
    return emit(0, remaining(backlog, t, tau), bns - slack, bns, 0, bs, bs)
  end
  local delay = 0
  if leaky then
    if max_delay > 0 and backlog > max_delay then
      return emit(0, remaining(backlog, t, tau), bns - max_delay, bns, 0, bs, bs)
    end
    delay = backlog
  end
  local ttl = backlog + n * t
  local new_s, new_ns = add(base_s, base_ns, n * t)
  set(key, format(new_s, new_ns), pttl(ttl, min_ttl))
  return emit(1, remaining(ttl, t, tau), 0, ttl, delay, 0, 0)
end

return run(4, prepare, step, true)

-- GCRA, TokenBucket and LeakyBucket: internal/gcra.Step.
-- KEYS[i]: the TAT, a decimal int64 of Unix nanoseconds.
-- Per request (F = 7): now_s, now_ns, n, t (interval ns), tau (Burst·t ns),
-- leaky (0|1), max_delay (ns, 0 = none).
-- Returns {allowed, remaining, retry_after, reset_after, delay, retry_s,
-- reset_s}: the durations are retry_after + retry_s·1e9 and
-- reset_after + reset_s·1e9.
local function step(key, now_s, now_ns, a)
  local n, t, tau = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local leaky, max_delay = ARGV[a + 3] == '1', tonumber(ARGV[a + 4])

  local tat_s, tat_ns = 0, 0
  local v = redis.call('GET', key)
  if v then tat_s, tat_ns = parse(v) end

  -- backlog = max(tat, now) − now, kept as bs·1e9 + bns too: after the
  -- clock went back it may pass 2^53, and the durations derived from it are
  -- then returned in two parts (seconds, nanoseconds) that Go adds exactly.
  local base_s, base_ns, bs, bns = now_s, now_ns, 0, 0
  if less(now_s, now_ns, tat_s, tat_ns) then
    base_s, base_ns, bs, bns = tat_s, tat_ns, tat_s - now_s, tat_ns - now_ns
  end
  local backlog = bs * E9 + bns

  local function remaining(ttl)
    if ttl >= tau then return 0 end
    return idiv(tau - ttl, t)
  end

  if n == 0 then
    return {1, remaining(backlog), 0, bns, 0, 0, bs}
  end
  -- backlog + n·t may pass 2^53: compare and subtract without forming it.
  local slack = tau - n * t
  if backlog > slack then
    return {0, remaining(backlog), bns - slack, bns, 0, bs, bs}
  end
  local ttl = backlog + n * t
  local delay = 0
  if leaky then
    if max_delay > 0 and backlog > max_delay then
      return {0, remaining(backlog), bns - max_delay, bns, 0, bs, bs}
    end
    delay = backlog
  end
  local new_s, new_ns = add(base_s, base_ns, n * t)
  redis.call('SET', key, format(new_s, new_ns), 'PX', pttl(ttl, min_ttl))
  return {1, remaining(ttl), 0, ttl, delay, 0, 0}
end

return run(7, step)

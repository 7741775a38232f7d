-- GCRA, TokenBucket and LeakyBucket: internal/gcra.Step.
-- KEYS[i]: the TAT, a decimal int64 of Unix nanoseconds.
-- Per request (F = 7): now_s, now_ns, n, t (interval ns), tau (Burst·t ns),
-- leaky (0|1), max_delay (ns, 0 = none).
-- Returns {allowed, remaining, retry_after, reset_after, delay, 0, 0}.
local function step(key, now_s, now_ns, a)
  local n, t, tau = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local leaky, max_delay = ARGV[a + 3] == '1', tonumber(ARGV[a + 4])

  local tat_s, tat_ns = 0, 0
  local v = redis.call('GET', key)
  if v then tat_s, tat_ns = parse(v) end

  local base_s, base_ns = now_s, now_ns
  if less(now_s, now_ns, tat_s, tat_ns) then base_s, base_ns = tat_s, tat_ns end
  local backlog = diff(base_s, base_ns, now_s, now_ns)

  local function remaining(ttl)
    if ttl >= tau then return 0 end
    return idiv(tau - ttl, t)
  end

  if n == 0 then
    return {1, remaining(backlog), 0, backlog, 0, 0, 0}
  end
  local ttl = backlog + n * t
  if ttl > tau then
    return {0, remaining(backlog), ttl - tau, backlog, 0, 0, 0}
  end
  local delay = 0
  if leaky then
    if max_delay > 0 and backlog > max_delay then
      return {0, remaining(backlog), backlog - max_delay, backlog, 0, 0, 0}
    end
    delay = backlog
  end
  local new_s, new_ns = add(base_s, base_ns, n * t)
  redis.call('SET', key, format(new_s, new_ns), 'PX', pttl(ttl, min_ttl))
  return {1, remaining(ttl), 0, ttl, delay, 0, 0}
end

return run(7, step)

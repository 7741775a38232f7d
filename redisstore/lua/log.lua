-- SlidingWindowLog: internal/slidinglog.Step.
-- KEYS[i]: a list of "at n" entries, oldest first, at a decimal int64 of
-- Unix nanoseconds and n the cost admitted then.
-- Spec (S = 2): rate, w (the Period, ns). Every duration fits in a double.
local function prepare(o)
  return {tonumber(ARGV[o]), tonumber(ARGV[o + 1])}
end

local function step(key, i, now_s, now_ns, n, sp)
  local rate, w = sp[1], sp[2]

  local raw = redis.call('LRANGE', key, 0, -1)
  local at_s, at_ns, cost = {}, {}, {}
  for i = 1, #raw do
    local a, c = string.match(raw[i], '^(%S+) (%d+)$')
    at_s[i], at_ns[i] = parse(a)
    cost[i] = tonumber(c)
  end
  local len = #raw
  -- Time that went back is taken to be the newest entry's.
  if len > 0 and less(now_s, now_ns, at_s[len], at_ns[len]) then
    now_s, now_ns = at_s[len], at_ns[len]
  end
  -- Drop what has left the window (now−w, now].
  local first = 1
  while first <= len and diff(at_s[first], at_ns[first], now_s, now_ns) <= -w do
    first = first + 1
  end
  if first > 1 then
    redis.call('LTRIM', key, first - 1, -1)
  end
  local sum = 0
  for i = first, len do sum = sum + cost[i] end
  local rem = rate - sum
  if rem < 0 then rem = 0 end
  local reset = 0
  if first <= len then reset = diff(at_s[len], at_ns[len], now_s, now_ns) + w end

  if n == 0 then return emit(1, rem, 0, reset, 0, 0, 0) end
  -- n > rate − sum, not sum + n > rate: the sum may pass 2^53.
  if n > rate - sum then
    -- Wait until enough of the oldest entries have left the window.
    local over = n - (rate - sum)
    local retry = 0
    for i = first, len do
      over = over - cost[i]
      if over <= 0 then
        retry = diff(at_s[i], at_ns[i], now_s, now_ns) + w
        break
      end
    end
    return emit(0, rem, retry, reset, 0, 0, 0)
  end
  if first <= len and at_s[len] == now_s and at_ns[len] == now_ns then
    redis.call('LSET', key, -1, format(now_s, now_ns) .. ' ' .. string.format('%d', cost[len] + n))
  else
    redis.call('RPUSH', key, format(now_s, now_ns) .. ' ' .. string.format('%d', n))
  end
  redis.call('PEXPIRE', key, pttl(w, min_ttl))
  return emit(1, rate - sum - n, 0, w, 0, 0, 0)
end

return run(2, prepare, step, false)

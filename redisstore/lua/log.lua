-- SlidingWindowLog: internal/slidinglog.Step.
-- KEYS[i]: a list of "at n" entries, oldest first, at a decimal int64 of
-- Unix nanoseconds and n the cost admitted then.
-- Per request (F = 5): now_s, now_ns, n, rate, w (Period ns).
-- Returns {allowed, remaining, retry_after, reset_after, 0, 0, 0}.
local function step(key, now_s, now_ns, a)
local n, rate, w = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])

local raw = redis.call('LRANGE', key, 0, -1)
local at_s, at_ns, cost = {}, {}, {}
for i = 1, #raw do
  local a, c = string.match(raw[i], '^(%S+) (%d+)$')
  at_s[i], at_ns[i] = parse(a)
  cost[i] = tonumber(c)
end
local len = #raw
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
local remaining = rate - sum
if remaining < 0 then remaining = 0 end
local reset = 0
if first <= len then reset = diff(at_s[len], at_ns[len], now_s, now_ns) + w end

if n == 0 then return {1, remaining, 0, reset, 0, 0, 0} end
if sum + n > rate then
  local over = sum + n - rate
  local retry = 0
  for i = first, len do
    over = over - cost[i]
    if over <= 0 then
      retry = diff(at_s[i], at_ns[i], now_s, now_ns) + w
      break
    end
  end
  return {0, remaining, retry, reset, 0, 0, 0}
end
if first <= len and at_s[len] == now_s and at_ns[len] == now_ns then
  redis.call('LSET', key, -1, format(now_s, now_ns) .. ' ' .. string.format('%d', cost[len] + n))
else
  redis.call('RPUSH', key, format(now_s, now_ns) .. ' ' .. string.format('%d', n))
end
redis.call('PEXPIRE', key, pttl(w, min_ttl))
return {1, rate - sum - n, 0, w, 0, 0, 0}
end

return run(5, step)

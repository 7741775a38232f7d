-- SlidingWindowLog: internal/slidinglog (Log.Step), O(1) amortized a call.
-- KEYS[i]: a list whose element 0 is the sum of the costs logged, followed
-- by the "at n" entries, oldest first, at a decimal int64 of Unix
-- nanoseconds and n the cost admitted then.
-- Spec (S = 2): rate, w (the Period, ns), read as a pair (s, ns) since w
-- may pass 2^53 (up to ratelimit.MaxWindow). Durations are replied in two
-- parts when they pass 2^53 (pdur), their unit a second.
local function prepare(o)
  local s, ns = parse(ARGV[o + 1])
  return {tonumber(ARGV[o]), s, ns}
end

local function entry(v)
  local a, c = string.match(v, '^(%S+) (%d+)$')
  local s, ns = parse(a)
  return s, ns, tonumber(c)
end

local function step(key, i, now_s, now_ns, n, sp)
  local rate, w_s, w_ns = sp[1], sp[2], sp[3]
  local orig_s, orig_ns = now_s, now_ns

  local len = redis.call('LLEN', key)
  if len == 0 and legacy(i) then len = redis.call('LLEN', key) end -- lua/legacy.lua
  if len == 1 then
    -- A sum without entries: never written so, but empty all the same.
    redis.call('DEL', key)
    len = 0
  end
  local count = len - 1 -- entries
  local sum, last_s, last_ns, last_n = 0, 0, 0, 0
  if count < 0 then count = 0 end
  if count > 0 then
    sum = tonumber(redis.call('LINDEX', key, 0))
    last_s, last_ns, last_n = entry(redis.call('LINDEX', key, -1))
    -- Time that went back is taken to be the newest entry's.
    if less(now_s, now_ns, last_s, last_ns) then now_s, now_ns = last_s, last_ns end
  end
  -- Drop what has left the window (now−w, now] from the head.
  local cut_s, cut_ns = psub(now_s, now_ns, w_s, w_ns)
  local k = 0
  while k < count do
    local as, ans, c = entry(redis.call('LINDEX', key, k + 1))
    if less(cut_s, cut_ns, as, ans) then break end
    sum = sum - c
    k = k + 1
  end
  if k > 0 then
    if k == count then
      redis.call('DEL', key)
      count, sum = 0, 0
    else
      -- Keep entries k+1…; the k-th (dropped) becomes the sum's slot.
      redis.call('LTRIM', key, k, -1)
      redis.call('LSET', key, 0, string.format('%d', sum))
      count = count - k
    end
  end
  local rem = rate - sum
  if rem < 0 then rem = 0 end
  local reset, rx = 0, 0
  if count > 0 then reset, rx = pdur(padd(w_s, w_ns, psub(last_s, last_ns, now_s, now_ns))) end

  if n < 0 then
    -- A refund of −n (ratelimit.Request.Refund): the newest entries' costs
    -- go, newest first (slidinglog.Log.Refund); then it is answered as a
    -- peek, at the request's own now.
    local left = -n
    while left > 0 and count > 0 do
      local as, ans, c = entry(redis.call('LINDEX', key, -1))
      if c <= left then
        redis.call('RPOP', key)
        left, sum, count = left - c, sum - c, count - 1
      else
        redis.call('LSET', key, -1, format(as, ans) .. ' ' .. string.format('%d', c - left))
        sum, left = sum - left, 0
      end
    end
    if count == 0 then
      redis.call('DEL', key)
      sum = 0
    elseif left < -n then
      redis.call('LSET', key, 0, string.format('%d', sum))
    end
    rem, reset, rx = rate - sum, 0, 0
    if rem < 0 then rem = 0 end
    if count > 0 then
      last_s, last_ns = entry(redis.call('LINDEX', key, -1))
      now_s, now_ns = orig_s, orig_ns
      if less(now_s, now_ns, last_s, last_ns) then now_s, now_ns = last_s, last_ns end
      reset, rx = pdur(padd(w_s, w_ns, psub(last_s, last_ns, now_s, now_ns)))
    end
    return emit(1, rem, 0, reset, 0, 0, rx)
  end
  if n == 0 then return emit(1, rem, 0, reset, 0, 0, rx) end
  -- n > rate − sum, not sum + n > rate: the sum may pass 2^53.
  if n > rate - sum then
    -- Wait until enough of the oldest entries have left the window.
    local over = n - (rate - sum)
    local retry, from, size = 0, 1, 16
    while from <= count do
      local chunk = redis.call('LRANGE', key, from, from + size - 1)
      for j = 1, #chunk do
        local as, ans, c = entry(chunk[j])
        over = over - c
        if over <= 0 then
          local x
          retry, x = pdur(padd(w_s, w_ns, psub(as, ans, now_s, now_ns)))
          return emit(0, rem, retry, reset, 0, x, rx)
        end
      end
      from, size = from + size, size * 4
    end
    return emit(0, rem, retry, reset, 0, 0, rx)
  end
  sum = sum + n
  if count > 0 and last_s == now_s and last_ns == now_ns then
    redis.call('LSET', key, -1, format(now_s, now_ns) .. ' ' .. string.format('%d', last_n + n))
    redis.call('LSET', key, 0, string.format('%d', sum))
  elseif count > 0 then
    redis.call('RPUSH', key, format(now_s, now_ns) .. ' ' .. string.format('%d', n))
    redis.call('LSET', key, 0, string.format('%d', sum))
  else
    redis.call('RPUSH', key, string.format('%d', sum), format(now_s, now_ns) .. ' ' .. string.format('%d', n))
  end
  redis.call('PEXPIRE', key, ppttl(w_s, w_ns, min_ttl))
  local wd, wx = pdur(w_s, w_ns)
  return emit(1, rate - sum, 0, wd, 0, 0, wx)
end

return run(2, prepare, step, false)

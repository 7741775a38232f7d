-- sluice redisstore: the head of gcra.lua and window.lua (after pairs.lua
-- for window.lua), which stand alone without prelude.lua: the first three
-- ARGV (see prelude.lua), and the pieces of their loops over the batch.
local call, tonumber, pack, unpack, format = redis.call, tonumber, struct.pack, struct.unpack, string.format
local per_now = ARGV[2] == '1'
local min_ttl = tonumber(ARGV[1])
local np = tonumber(ARGV[3])

-- reqnow returns the now of the request whose own fields continue at
-- ARGV[o] when each request carries its own (ARGV[2] "1"), and o past
-- them; else s, ns and o as they are.
local function reqnow(o, s, ns)
  if per_now then return tonumber(ARGV[o]), tonumber(ARGV[o + 1]), o + 2 end
  return s, ns, o
end

-- second returns the whole second at or after the time (s, ns).
local function second(s, ns)
  if ns > 0 then return s + 1 end
  return s
end

-- exat: the EXAT arguments formatted so far.
local exat = {}

-- expire writes v at key, to expire at the whole second e (Unix, on
-- Redis's clock): the expiry it has (KEEPTTL) when e is exp, the second
-- its state said, else EXAT e.
local function expire(key, v, e, exp)
  if e == exp then
    call('SET', key, v, 'KEEPTTL')
    return
  end
  local arg = exat[e]
  if not arg then
    arg = format('%d', e)
    exat[e] = arg
  end
  call('SET', key, v, 'EXAT', arg)
end

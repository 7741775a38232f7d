-- sluice redisstore: the head of gcra.lua and window.lua (after pairs.lua
-- for window.lua), which stand alone without prelude.lua: the first three
-- ARGV (see prelude.lua), and the write of a state that expires at a whole
-- second. Each function here is a closure made at every call of the script
-- (about 0.1 µs of redis-server's time): only what saves a repetition.
local call, tonumber, pack, unpack, format = redis.call, tonumber, struct.pack, struct.unpack, string.format
local per_now = ARGV[2] == '1'
local min_ttl = tonumber(ARGV[1])
local np = tonumber(ARGV[3])

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

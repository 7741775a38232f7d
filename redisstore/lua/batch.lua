-- sluice redisstore: the head of gcra.lua and window.lua (after pairs.lua
-- for window.lua), which stand alone without prelude.lua: the first three
-- ARGV (see prelude.lua), and the write of a state that expires at a whole
-- second. Each function here is a closure made at every call of the script
-- (about 0.1 µs of redis-server's time): only what saves a repetition.
local call, tonumber, pack, unpack, format = redis.call, tonumber, struct.pack, struct.unpack, string.format
local per_now = ARGV[2] == '1'
local min_ttl = tonumber(ARGV[1])
local np = tonumber(ARGV[3])

-- The states' storage, one string key each (gcra.lua; lua/packed.lua
-- redefines these for the packed layout): fetch reads every request's
-- state, reread one (after legacy(i) moved it), setpx writes one to
-- expire in ms milliseconds, del deletes one; expire, below, writes one to
-- expire at a whole second. The packed layout's take the request's now
-- too (s, ns), which these ignore.
local function fetch() return call('MGET', _G.unpack(KEYS)) end
local function reread(key) return call('GET', key) end
local function setpx(key, v, ms) call('SET', key, v, 'PX', format('%d', ms)) end
local function del(key) call('DEL', key) end
-- ptime returns the expiry (Unix ms, PEXPIRETIME's) of the state at key:
-- a fixed window's integer count keeps its window's end there.
local function ptime(key) return call('PEXPIRETIME', key) end
-- integers: window.lua may keep a fixed window's count as an integer
-- (not in the packed layout).
local integers = true

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

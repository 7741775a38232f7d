-- sluice redisstore: the packed layout's storage (Options.Layout,
-- packed.go), after batch.lua and before gcra.lua or window.lua: it
-- redefines batch.lua's fetch, reread, setpx, del and expire so that a
-- request's state is a field of a hash, many limiters' in one, rather
-- than a string key.
--
-- KEYS[i] is the hash's name followed by the field, FIELD bytes: the
-- script splits it. The value is the string layout's, byte for byte.
--
-- Expiry: a field has none of its own (Redis 7.0), so the hash expires at
-- the latest of its fields' expiries: a write that moves a field's later
-- than the hash's moves the hash's (EXPIREAT with the server's clock,
-- PEXPIRE with per-request times), and a state that has decayed (a full
-- bucket, the same as no state: dead) is removed when a write finds it.
--
-- Sweep: a write that adds a field to a hash of more than SWEEP fields,
-- and more than its mark, removes the hash's dead fields (but those this
-- call wrote), then sets the mark to twice what is left (at least SWEEP),
-- in the field '' (no state's field is empty): a hash is swept once per
-- as many new fields as it had live ones, so that the cost of a sweep,
-- O(fields), is amortised over the writes that made it needed. A live
-- field is never removed.
local FIELD, SWEEP = 8, 64
local sub, tostr = string.sub, tostring
local hexp = {}    -- hash → its expiry (whole seconds) as this call left it
local touched = {} -- KEYS this call wrote: the sweep keeps them

local function split(k)
  local n = #k - FIELD
  return sub(k, 1, n), sub(k, n + 1)
end

-- PER is the KEYS of a request (the shape's file before: tat.lua,
-- wdead.lua); the second of window.lua's pair, the string layout's
-- marker, is read only by legacy(i).
integers = false
fetch = function()
  local got = {}
  for i = 1, #KEYS, PER do
    got[i] = call('HGET', split(KEYS[i]))
    if PER == 2 then got[i + 1] = false end
  end
  return got
end

reread = function(key)
  return call('HGET', split(key))
end

-- ptime: a field has no expiry of its own; an integer count in one was
-- just moved from the string layout's one key (packlegacy.lua), whose
-- expiry was its window's end.
ptime = function(key)
  return moved_at[key] or -1
end

del = function(key)
  local h, f = split(key)
  call('HDEL', h, f)
  touched[key] = true
  hexp[h] = nil -- the hash may be gone, and a write make it again without an expiry
end

-- sweep removes h's dead fields as of now (s, ns), and sets its mark.
local function sweep(h, s, ns)
  local all, gone = call('HGETALL', h), {}
  for j = 1, #all, 2 do
    local f = all[j]
    if #f == FIELD and not touched[h .. f] and dead(all[j + 1], s, ns) then gone[#gone + 1] = f end
  end
  for j = 1, #gone, 256 do
    call('HDEL', h, _G.unpack(gone, j, math.min(j + 255, #gone)))
  end
  local left = #all / 2 - #gone
  call('HSET', h, '', tostr(math.max(SWEEP, 2 * left)))
end

-- put writes v at key; a new field may make its hash due for a sweep.
local function put(key, v, s, ns)
  local h, f = split(key)
  touched[key] = true
  if call('HSET', h, f, v) == 0 then return h end
  local n = call('HLEN', h)
  if n > SWEEP and n > tonumber(call('HGET', h, '') or SWEEP) then sweep(h, s, ns) end
  return h
end

setpx = function(key, v, ms, s, ns)
  local h = put(key, v, s, ns)
  if call('PTTL', h) < ms then call('PEXPIRE', h, ms) end
end

expire = function(key, v, e, exp, s, ns)
  local h = put(key, v, s, ns)
  local cur = hexp[h]
  if cur == nil then cur = call('EXPIRETIME', h) end
  if cur < e then
    -- GT: legacy(i) may have moved the expiry since it was read.
    if cur < 0 then call('EXPIREAT', h, e) else call('EXPIREAT', h, e, 'GT') end
    cur = e
  end
  hexp[h] = cur
end

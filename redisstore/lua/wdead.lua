-- sluice redisstore: dead(v, s, ns), for lua/packed.lua: whether the
-- window counters v (window.lua's) have decayed at now (s, ns): past the
-- second the state expires at (with the server's clock), or past the end
-- of the window after its own (the sliding counter's last use of its
-- counts), whichever the state tells. Either is the same as no state.
local PER = 2 -- KEYS a request: the state's and the marker's (unused)
local function dead(v, s, ns)
  local st_s, st_ns, exp, w_s, w_ns, _
  if #v == 28 then
    st_s, st_ns, _, _, exp, w_s, w_ns = struct.unpack('<I4I4I4I4I4I4I4', v)
  elseif #v >= 48 then
    st_s, st_ns, _, _, exp, w_s, w_ns = struct.unpack('<i8i4i8i8i8i8i4', v)
  else
    st_s, st_ns, _, _, exp = struct.unpack('<i8i4i8i8i8', v) -- no period
    return exp > 0 and exp <= s
  end
  if exp > 0 and exp <= s then return true end
  local e_s, e_ns = st_s + 2 * w_s, st_ns + 2 * w_ns
  while e_ns >= 1000000000 do e_s, e_ns = e_s + 1, e_ns - 1000000000 end
  return e_s < s or (e_s == s and e_ns <= ns)
end

-- sluice redisstore: dead(v, s, ns), for lua/packed.lua: whether the
-- bucket state v (gcra.lua's) has decayed at now (s, ns), its TAT at or
-- before now: a full bucket, the same as no state.
local PER = 1 -- KEYS a request
local function dead(v, s, ns)
  local tat_s, tat_ns, _
  if #v >= 20 then
    tat_s, tat_ns = struct.unpack('<i8i4', v)
  else
    tat_s, _, tat_ns = struct.unpack('<I4I4I4', v)
  end
  return tat_s < s or (tat_s == s and tat_ns <= ns)
end

-- sluice redisstore: reads states written under the readable key names of
-- before the compact ones (keys.go), until they expire. It runs first (after
-- node.lua on a Cluster) and moves each such state to its compact name, so
-- that the script after it finds it there.
--
-- ARGV ends with the readable names, one per KEYS[i] ("" for none), then
-- their number, prefixed "w" for window.lua's keys, which come in pairs
-- (the binary state's, the marker's). The script after this one reads its
-- ARGV from the front and never sees them.
--
-- A state found under its readable name and not its compact one is
-- renamed (RENAME keeps the expiry). A marker and its counter move
-- together; a counter that the compact layout has too (plain-command
-- charges counted there while the readable one was still read, which
-- their undo takes back) gets the readable one's count added, so that
-- the undo stays right.
do
  local tail = ARGV[#ARGV]
  local win = string.sub(tail, 1, 1) == 'w'
  if win then tail = string.sub(tail, 2) end
  local m = tonumber(tail)
  local base = #ARGV - m - 1
  local rcall = redis.call
  for i = 1, m do
    local old, new = ARGV[base + i], KEYS[i]
    if old ~= '' and rcall('EXISTS', old) == 1 then
      if win and i % 2 == 0 then
        -- A marker: "period:start", naming its counter (marker .. ":" ..
        -- value).
        local mv = rcall('GET', old)
        local oc, nc = old .. ':' .. mv, new .. ':' .. mv
        local c = rcall('GET', oc)
        if c then
          if rcall('EXISTS', nc) == 1 then
            rcall('INCRBY', nc, c)
            rcall('DEL', oc)
          else
            rcall('RENAME', oc, nc)
          end
        end
        rcall('RENAME', old, new)
      elseif rcall('EXISTS', new) == 0 then
        rcall('RENAME', old, new)
      else
        rcall('DEL', old)
      end
    end
  end
end

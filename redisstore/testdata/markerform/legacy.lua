-- sluice redisstore: reads states written under the readable key names of
-- before the compact ones (keys.go), until they expire. It comes first
-- (after node.lua on a Cluster) and defines legacy(i), which the script
-- calls for a request whose state it does not find under its compact
-- names: legacy(i) moves the request's state from its readable names, if
-- any, and reports whether it moved one (the script then reads it again).
--
-- ARGV ends with, per request, its readable key ("" for none), then the
-- prefix, the shape's tags (one per key of a request: "t", "l", or "cm" for
-- window.lua's pairs, the binary state's and the marker's) and the number
-- of requests. The readable name of a request's key of tag x is prefix ..
-- x .. "{" .. key .. "}". The script reads its ARGV from the front and
-- never sees these.
--
-- A state found under its readable name and not its compact one is
-- renamed (RENAME keeps the expiry). A marker and its counter move
-- together; a counter that the compact layout has too (plain-command
-- charges counted there while the readable one was still read, which
-- their undo takes back) gets the readable one's count added, so that
-- the undo stays right.
local legacy
do
  local nreq = tonumber(ARGV[#ARGV])
  local tags, prefix = ARGV[#ARGV - 1], ARGV[#ARGV - 2]
  local base, per = #ARGV - 3 - nreq, #tags
  local rcall = redis.call
  legacy = function(i)
    local key = ARGV[base + i]
    if key == '' then return false end
    local olds = {}
    for j = 1, per do
      olds[j] = prefix .. string.sub(tags, j, j) .. '{' .. key .. '}'
    end
    if rcall('EXISTS', unpack(olds)) == 0 then return false end
    for j = 1, per do
      local old, new = olds[j], KEYS[(i - 1) * per + j]
      if rcall('EXISTS', old) == 1 then
        if j == 2 then
          -- A marker: "period:start", naming its counter (marker .. ":"
          -- .. value).
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
    return true
  end
end

-- sluice redisstore: reads states written under the readable key names of
-- before the compact ones (keys.go), until they expire. It runs first (after
-- node.lua on a Cluster) and moves each such state to its compact name, so
-- that the script after it finds it there.
--
-- ARGV ends with, per request, its readable key ("" for none), then the
-- prefix, the shape's tags (one per key of a request: "t", "l", or "cm" for
-- window.lua's pairs, the binary state's and the marker's) and the number
-- of requests. The readable name of a request's key of tag x is prefix ..
-- x .. "{" .. key .. "}". The script after this one reads its ARGV from
-- the front and never sees these.
--
-- A state found under its readable name and not its compact one is
-- renamed (RENAME keeps the expiry). A marker and its counter move
-- together; a counter that the compact layout has too (plain-command
-- charges counted there while the readable one was still read, which
-- their undo takes back) gets the readable one's count added, so that
-- the undo stays right. One EXISTS looks for all of a batch's readable
-- names, and one per name only when that finds some, or when they span
-- several slots (a Cluster node's batch).
do
  local n = tonumber(ARGV[#ARGV])
  local tags, prefix = ARGV[#ARGV - 1], ARGV[#ARGV - 2]
  local base, per = #ARGV - 3 - n, #tags
  local rcall, olds = redis.call, {}
  for i = 1, n do
    local key = ARGV[base + i]
    if key ~= '' then
      for j = 1, per do
        olds[(i - 1) * per + j] = prefix .. string.sub(tags, j, j) .. '{' .. key .. '}'
      end
    end
  end
  local found = 0
  local list = {}
  for _, v in pairs(olds) do list[#list + 1] = v end
  if #list > 0 then
    found = redis.pcall('EXISTS', unpack(list))
    if type(found) ~= 'number' then found = 1 end -- several slots: look at each
  end
  if found > 0 then
    for i = 1, n * per do
      local old, new = olds[i], KEYS[i]
      if old and rcall('EXISTS', old) == 1 then
        if per == 2 and i % 2 == 0 then
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
  end
end

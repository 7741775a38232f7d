-- sluice redisstore: the node batch preamble (a Redis Cluster). A batch of
-- keys from several hash slots that one node serves goes in one call: the
-- call declares one key, KEYS[1], only so that the client routes it to the
-- node, and passes the batch's keys in ARGV, which a script without a
-- shebang may touch across slots (Redis's compatibility mode; Redis 7
-- names it the allow-cross-slot-keys flag) as long as they are local. This
-- preamble goes before the shape's script and hands it KEYS and ARGV as a
-- per-slot call would:
--
--   ARGV[1]  k, the number of keys of the batch
--   ARGV[2]  the command that reads one key: GET (string states, which the
--            script reads with one MGET) or EXISTS (lists)
--   ARGV[3 .. k+2]  the keys
--   then the script's own ARGV.
--
-- Every key is read, one command each, before the script runs: a key the
-- node does not serve (its slot moved, or is migrating and the key is not
-- here yet) fails the call with "non local key" before anything is written,
-- and the store sends the batch again one slot at a time. A multi-key
-- command cannot span slots even here, so the script's MGET of all its
-- keys is answered from these reads.
local KEYS, ARGV, redis = (function(A, R)
  local nk, probe = tonumber(A[1]), A[2]
  local keys, args, got = {}, {}, {}
  local get = R.call
  for i = 1, nk do
    local k = A[i + 2]
    keys[i] = k
    got[i] = get(probe, k)
  end
  for i = nk + 3, #A do args[i - nk - 2] = A[i] end
  local function call(cmd, ...)
    if cmd == 'MGET' and probe == 'GET' and select('#', ...) == nk then
      return got
    end
    return get(cmd, ...)
  end
  return keys, args, setmetatable({call = call}, {__index = R})
end)(ARGV, redis)

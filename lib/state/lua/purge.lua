--[[
  Removes an object for good: its hash, its name from the index sets, and the claims it
  still holds — unless a guard key still exists (e.g. the set of hosts a DPU serves).

  KEYS[1]          object hash
  KEYS[2..n+1]     index sets to remove the name from (n = ARGV[2], default all of KEYS)
  KEYS[n+2..]      guard keys: none of them may exist

  ARGV[1]  name
  ARGV[2]  n, the number of index sets

  Returns 1 when the object existed and was removed, 0 when there was none, or
  {'guard', key} when a guard key exists (nothing changed).
]]
local n = tonumber(ARGV[2] or tostring(#KEYS - 1))
for i = n + 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {'guard', KEYS[i]} end
end
local claims = redis.call('HGET', KEYS[1], 'claims')
if claims then
  for _, key in ipairs(cjson.decode(claims)) do
    if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
  end
end
for i = 2, n + 1 do redis.call('SREM', KEYS[i], ARGV[1]) end
return redis.call('DEL', KEYS[1])

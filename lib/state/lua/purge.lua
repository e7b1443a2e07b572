--[[
  Removes an object for good: its hash, its name from the index sets, and the claims it
  still holds.

  KEYS[1]      object hash
  KEYS[2..]    index sets to remove the name from

  ARGV[1]  name

  Returns 1 when the object existed, 0 otherwise.
]]
local claims = redis.call('HGET', KEYS[1], 'claims')
if claims then
  for _, key in ipairs(cjson.decode(claims)) do
    if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
  end
end
for i = 2, #KEYS do redis.call('SREM', KEYS[i], ARGV[1]) end
return redis.call('DEL', KEYS[1])

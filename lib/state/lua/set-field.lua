--[[
  Sets one field of an object hash while the object exists: a purged object's hash is
  never brought back by a late write.

  KEYS[1]  object hash

  ARGV[1]  field
  ARGV[2]  value

  Returns 1 when written, 0 when the object does not exist.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1

--[[
  Takes back the public IP an owner holds; it becomes free again.

  KEYS[1]  registry hash: address hex -> owner ('' while free)
  KEYS[2]  free sorted set: address hex
  KEYS[3]  owners hash: owner -> address hex

  ARGV[1]  owner

  Returns the address hex released, or false when the owner held none.
]]
local hex = redis.call('HGET', KEYS[3], ARGV[1])
if not hex then
  return false
end
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HGET', KEYS[1], hex) == ARGV[1] then
  redis.call('HSET', KEYS[1], hex, '')
  redis.call('ZADD', KEYS[2], 0, hex)
end
return hex

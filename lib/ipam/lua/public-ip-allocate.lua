--[[
  Gives the owner the lowest free public IP; an owner that already holds one gets it
  back, so a retried handler never takes a second address.

  KEYS[1]  registry hash: address hex -> owner ('' while free)
  KEYS[2]  free sorted set: address hex
  KEYS[3]  owners hash: owner -> address hex

  ARGV[1]  owner

  Returns the address hex, or false when no public IP is free.
]]
local held = redis.call('HGET', KEYS[3], ARGV[1])
if held then
  return held
end
local free = redis.call('ZRANGE', KEYS[2], 0, 0)
local hex = free[1]
if not hex then
  return false
end
redis.call('ZREM', KEYS[2], hex)
redis.call('HSET', KEYS[1], hex, ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], hex)
return hex

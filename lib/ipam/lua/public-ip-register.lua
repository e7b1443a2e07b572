--[[
  Registers a public IP as available. Registering it again changes nothing.

  KEYS[1]  registry hash: address hex -> owner ('' while free)
  KEYS[2]  free sorted set: address hex (score 0; lowest address first)

  ARGV[1]  address hex

  Returns 1 when newly registered, 0 when it already was.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], '')
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1

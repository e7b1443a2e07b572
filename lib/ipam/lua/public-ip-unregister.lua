--[[
  Removes a public IP from the registry, unless it is allocated.

  KEYS[1]  registry hash: address hex -> owner ('' while free)
  KEYS[2]  free sorted set: address hex

  ARGV[1]  address hex

  Returns {'ok'} | {'none'} (not registered) | {'allocated', owner}
]]
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if not owner then
  return {'none'}
end
if owner ~= '' then
  return {'allocated', owner}
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return {'ok'}

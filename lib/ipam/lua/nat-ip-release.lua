--[[
  Releases a NAT IP claim, only if the given owner holds it.

  KEYS[1]  claims hash: NAT address hex -> owner

  ARGV[1]  NAT address hex
  ARGV[2]  owner

  Returns 1 when released, 0 when the owner did not hold it.
]]
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0

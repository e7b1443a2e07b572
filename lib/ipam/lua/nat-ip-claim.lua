--[[
  Claims a DPU NAT IP for one host. Claiming it again for the same host changes nothing.

  KEYS[1]  claims hash: NAT address hex -> owner

  ARGV[1]  NAT address hex
  ARGV[2]  owner

  Returns {'ok'} | {'held', owner} (another owner has it)
]]
local holder = redis.call('HGET', KEYS[1], ARGV[1])
if holder and holder ~= ARGV[2] then
  return {'held', holder}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'ok'}

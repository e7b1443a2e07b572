--[[
  Gives back what a Fabric group (the owner) holds: its VNI and its VLAN id. Releasing
  again changes nothing.

  KEYS[1]  VNI busy bitmap     KEYS[2]  VNI owners hash: owner -> VNI
  KEYS[3]  VLAN busy bitmap    KEYS[4]  VLAN owners hash: owner -> VLAN id

  ARGV[1]  owner

  Returns {vni, vlan}, each '' when the owner held none.
]]
local out = {}
for i = 1, 3, 2 do
  local held = redis.call('HGET', KEYS[i + 1], ARGV[1])
  if held then
    redis.call('SETBIT', KEYS[i], tonumber(held), 0)
    redis.call('HDEL', KEYS[i + 1], ARGV[1])
  end
  out[#out + 1] = held or ''
end
return out

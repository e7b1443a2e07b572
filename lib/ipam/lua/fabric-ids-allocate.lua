--[[
  Gives a Fabric group (the owner) a VNI and a VLAN id, each the lowest free one of its
  range, both or neither; an owner that already holds them gets them back, so a retried
  handler never takes a second pair. Ids are bit offsets in each pool's bitmap (absolute,
  so that a range the operator widens or moves keeps what is held).

  KEYS[1]  VNI busy bitmap: bit N set = VNI N held
  KEYS[2]  VNI owners hash: owner -> VNI
  KEYS[3]  VLAN busy bitmap
  KEYS[4]  VLAN owners hash: owner -> VLAN id

  ARGV[1]  owner
  ARGV[2]  first VNI of the range   ARGV[3]  last VNI of the range
  ARGV[4]  first VLAN of the range  ARGV[5]  last VLAN of the range

  Returns {'ok', vni, vlan}, or {'exhausted', 'vni' | 'vlan'} (nothing taken).
]]
local owner = ARGV[1]

-- The id the owner holds in a pool, or the lowest clear bit in [first, last], or nil.
local function pick(busy, owners, first, last)
  local held = redis.call('HGET', owners, owner)
  if held then return tonumber(held), false end
  -- BITPOS clips its range to the string: pad the bitmap up to `last` first.
  redis.call('SETBIT', busy, last, redis.call('GETBIT', busy, last))
  local at = redis.call('BITPOS', busy, 0, first, last, 'BIT')
  if at < first or at > last then return nil, false end
  return at, true
end

local vni, newVni = pick(KEYS[1], KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]))
if not vni then return {'exhausted', 'vni'} end
local vlan, newVlan = pick(KEYS[3], KEYS[4], tonumber(ARGV[4]), tonumber(ARGV[5]))
if not vlan then return {'exhausted', 'vlan'} end
if newVni then
  redis.call('SETBIT', KEYS[1], vni, 1)
  redis.call('HSET', KEYS[2], owner, vni)
end
if newVlan then
  redis.call('SETBIT', KEYS[3], vlan, 1)
  redis.call('HSET', KEYS[4], owner, vlan)
end
return {'ok', vni, vlan}

--[[
  Gives a DPU of a group its transit slot (a link-local address pair): the lowest free
  slot, or the one it already holds.

  KEYS[1]  slots bitmap: bit i set = slot i in use
  KEYS[2]  owners hash: dpu id -> slot

  ARGV[1]  dpu id
  ARGV[2]  number of slots

  Returns the slot number, or -1 when every slot is in use.
]]
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  return tonumber(held)
end
local pos = redis.call('BITPOS', KEYS[1], 0)
if pos < 0 or pos >= tonumber(ARGV[2]) then
  return -1
end
redis.call('SETBIT', KEYS[1], pos, 1)
redis.call('HSET', KEYS[2], ARGV[1], pos)
return pos

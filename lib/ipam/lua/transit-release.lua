--[[
  Frees the transit slot a DPU of a group holds.

  KEYS[1]  slots bitmap
  KEYS[2]  owners hash: dpu id -> slot

  ARGV[1]  dpu id

  Returns the slot freed, or -1 when the DPU held none.
]]
local held = redis.call('HGET', KEYS[2], ARGV[1])
if not held then
  return -1
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('SETBIT', KEYS[1], tonumber(held), 0)
return tonumber(held)

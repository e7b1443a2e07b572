--[[
  Takes an object lock for a holder, or takes it again when that holder already has it
  (the same job, resumed after its worker died), renewing its lease.

  KEYS[1]  lock key
  ARGV[1]  holder (a job id)
  ARGV[2]  lease in ms

  Returns 1 when the holder has the lock, 0 when another holder has it.
]]
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1

--[[
  Takes an object lock for a holder, or takes it again when that holder already has it
  (the same job, resumed after its worker died, or run again after it parked), renewing
  its lease. The lock's value is the holder and the run that took it last: a run that
  ended releases the lock only if no later run of the same holder has taken it since.

  KEYS[1]  lock key
  ARGV[1]  holder (a job id)
  ARGV[2]  lease in ms
  ARGV[3]  the run taking it (its worker's lock token; absent or empty: the holder alone,
           as a lease is held)

  Returns 1 when the holder has the lock, 0 when another holder has it.
]]
local current = redis.call('GET', KEYS[1])
if current and string.match(current, '^[^\n]*') ~= ARGV[1] then return 0 end
local value = ARGV[1]
if ARGV[3] and ARGV[3] ~= '' then value = value .. '\n' .. ARGV[3] end
redis.call('SET', KEYS[1], value, 'PX', tonumber(ARGV[2]))
return 1

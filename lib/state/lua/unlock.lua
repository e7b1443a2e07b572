--[[
  Releases an object lock, only if the caller's run still holds it: its lease may have run
  out and another holder taken the lock since, or a later run of the same holder (the job
  woken from a park while this run was ending) taken it again.

  KEYS[1]  lock key
  ARGV[1]  the holder (a job id)
  ARGV[2]  the run that took it (its worker's lock token; absent or empty: the holder alone)

  Returns 1 when released, 0 when the lock was not this run's (or not held).
]]
local value = ARGV[1]
if ARGV[2] and ARGV[2] ~= '' then value = value .. '\n' .. ARGV[2] end
if redis.call('GET', KEYS[1]) == value then
  return redis.call('DEL', KEYS[1])
end
return 0

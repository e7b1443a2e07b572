--[[
  Releases an object lock, only if the caller still holds it (its lease may have run out
  and another worker taken the lock since).

  KEYS[1]  lock key
  ARGV[1]  the holder (a job id)

  Returns 1 when released, 0 when the lock was not the caller's (or not held).
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

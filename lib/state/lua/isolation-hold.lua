--[[
  Records or drops one hold of a DPU's pending isolation, keeping the set of DPUs that
  have any in step with their hashes (`dpu.health` reads the set, one call a run).

  KEYS[1]  hash hold owner -> host (the DPU's holds)
  KEYS[2]  set of the DPUs holding any
  ARGV[1]  'record' | 'drop'
  ARGV[2]  the DPU's id
  ARGV[3]  the hold's owner
  ARGV[4]  the host (record)

  Returns, for 'record', the number of holds the DPU keeps now; for 'drop', 1 when this
  call removed the hold and 0 when it was not there (another run dropped it first).
]]
if ARGV[1] == 'record' then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
  redis.call('SADD', KEYS[2], ARGV[2])
  return redis.call('HLEN', KEYS[1])
end
local removed = redis.call('HDEL', KEYS[1], ARGV[3])
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[2]) end
return removed

--[[
  Reads the controller's record of last beats, leaving out (and removing) a record of more
  than ARGV[1] bytes: only a beat read within that bound is recorded, but a record made
  before the bound was set must not be copied on every read either.

  KEYS[1]  the hash of last beats (field: DPU id, value: the beat's JSON)

  ARGV[1]  the most bytes a beat may have
  ARGV[2…] the DPU ids to read; none: every one

  Returns a flat list of DPU id, beat JSON pairs (the DPUs with a record within the bound).
]]
local max = tonumber(ARGV[1])
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('HKEYS', KEYS[1])
end
local found = {}
for _, id in ipairs(ids) do
  local size = redis.call('HSTRLEN', KEYS[1], id)
  if size > max then
    redis.call('HDEL', KEYS[1], id)
  elseif size > 0 then
    found[#found + 1] = id
    found[#found + 1] = redis.call('HGET', KEYS[1], id)
  end
end
return found

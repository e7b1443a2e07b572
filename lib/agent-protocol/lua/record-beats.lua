--[[
  Records each DPU's newest heartbeat in the controller's hash of last beats, unless a
  newer one is recorded already (two readers may record at once, in either order).

  KEYS[1]  the hash of last beats (field: DPU id, value: the beat's JSON)

  ARGV     triples: DPU id, the beat's `at` (ISO 8601, UTC), the beat's JSON

  Returns the number of beats recorded.
]]
local recorded = 0
for i = 1, #ARGV, 3 do
  local id, at, beat = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[1], id)
  local oldAt = nil
  if old then
    local ok, decoded = pcall(cjson.decode, old)
    if ok and type(decoded) == 'table' and type(decoded.at) == 'string' then oldAt = decoded.at end
  end
  if oldAt == nil or oldAt < at then
    redis.call('HSET', KEYS[1], id, beat)
    recorded = recorded + 1
  end
end
return recorded

--[[
  Reads DPU heartbeats, each only when it is a string of at most ARGV[1] bytes: what an
  agent writes under its own key is its own to choose, its size too, and the controller
  must not copy a beat of many megabytes to find out it is not one.

  KEYS     the heartbeat keys (all in the `{beats}` slot)

  ARGV[1]  the most bytes a beat may have

  Returns, per key, its value, or false when it is missing, not a string or too long.
]]
local max = tonumber(ARGV[1])
local values = {}
for i, key in ipairs(KEYS) do
  values[i] = false
  if redis.call('TYPE', key)['ok'] == 'string' and redis.call('STRLEN', key) <= max then
    values[i] = redis.call('GET', key)
  end
end
return values

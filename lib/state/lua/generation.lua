--[[
  Records the generation of the newest webhook event applied for an object: only ever
  raised, never lowered (two deliveries may finish in either order).

  KEYS[1]  the object's generation key
  ARGV[1]  the event's generation (an integer)
  ARGV[2]  how long to keep it, in ms (it outlives the object: a late event about a
           deleted object must still be known as older)

  Returns the generation recorded now.
]]
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local next = tonumber(ARGV[1])
if next > current then current = next end
redis.call('SET', KEYS[1], current, 'PX', tonumber(ARGV[2]))
return current

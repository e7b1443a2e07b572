--[[
  The DHCP relay id of a group: allocated once from a counter that never goes back, so
  no two groups — now or ever — share one (it names the relay port, the relay's circuit id).

  KEYS[1]  the group's hash
  KEYS[2]  the relay id counter

  Returns the group's relay id, or false when the group does not exist.
]]
local id = redis.call('HGET', KEYS[1], 'relayId')
if id then return tonumber(id) end
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'relayId', id)
return id

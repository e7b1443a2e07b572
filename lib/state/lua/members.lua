--[[
  Records that a holder is alive among those running one lease (a replica set), and says
  how many are.

  KEYS[1]  the members' sorted set (member: holder, score: when its record runs out, ms)
  ARGV[1]  holder
  ARGV[2]  how long the record lasts, in ms

  Returns the number of live members, the holder included.
]]
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return redis.call('ZCARD', KEYS[1])

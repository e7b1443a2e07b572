--[[
  Hands the public IP one owner holds to another owner, in one step: a force-detached
  host's public IP, still announced by its DPU, becomes held by that DPU's pending
  isolation, and no allocation hands it out meanwhile. Run again, it changes nothing.

  KEYS[1]  registry hash: address hex -> owner ('' while free)
  KEYS[2]  free sorted set: address hex (untouched: the address never becomes free)
  KEYS[3]  owners hash: owner -> address hex

  ARGV[1]  the owner giving it (a host name)
  ARGV[2]  the owner taking it

  Returns {'ok', hex} (the address the second owner holds), {'none'} when neither holds
  one, or {'held', hex} when the second owner holds another address already (nothing moved).
]]
local from, to = ARGV[1], ARGV[2]
local hex = redis.call('HGET', KEYS[3], from)
local already = redis.call('HGET', KEYS[3], to)
if not hex then
  if already then return { 'ok', already } end
  return { 'none' }
end
if already and already ~= hex then return { 'held', already } end
redis.call('HDEL', KEYS[3], from)
redis.call('HSET', KEYS[3], to, hex)
redis.call('HSET', KEYS[1], hex, to)
redis.call('ZREM', KEYS[2], hex)
return { 'ok', hex }

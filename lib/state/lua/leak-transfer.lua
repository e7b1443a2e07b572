--[[
  Hands every address one owner leaks at the fabric's border to another owner, in one
  step: a force-detached host's addresses, still announced by its DPU, become held by that
  DPU's pending isolation. Run again, it changes nothing (the first owner holds none).

  KEYS[1]  hash address -> owner (every leaked address)
  KEYS[2]  hash owner -> the owner's addresses, space separated
  ARGV[1]  the owner giving them (a host name)
  ARGV[2]  the owner taking them

  Returns the addresses the second owner holds now (a list, maybe empty).
]]
local from, to = ARGV[1], ARGV[2]
local held, seen = {}, {}
local before = redis.call('HGET', KEYS[2], to)
if before then
  for address in string.gmatch(before, '%S+') do
    if redis.call('HGET', KEYS[1], address) == to and not seen[address] then
      seen[address] = true
      held[#held + 1] = address
    end
  end
end
local given = redis.call('HGET', KEYS[2], from)
if given then
  for address in string.gmatch(given, '%S+') do
    if redis.call('HGET', KEYS[1], address) == from then
      redis.call('HSET', KEYS[1], address, to)
      if not seen[address] then
        seen[address] = true
        held[#held + 1] = address
      end
    end
  end
  redis.call('HDEL', KEYS[2], from)
end
if #held > 0 then
  redis.call('HSET', KEYS[2], to, table.concat(held, ' '))
else
  redis.call('HDEL', KEYS[2], to)
end
return held

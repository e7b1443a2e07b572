--[[
  Claims addresses a Fabric host leaks at the fabric's border for its owner: all of them
  or none. An address another owner holds refuses the whole claim; the owner's earlier
  addresses it no longer names are given back.

  KEYS[1]  hash address -> owner (every leaked address)
  KEYS[2]  hash owner -> the owner's addresses, space separated
  ARGV[1]  owner (a host name)
  ARGV[2…] the addresses to hold (canonical text)

  Returns {'ok'} when the owner holds exactly ARGV[2…], or {'taken', address, holder}.
]]
local owner = ARGV[1]
for i = 2, #ARGV do
  local holder = redis.call('HGET', KEYS[1], ARGV[i])
  if holder and holder ~= owner then return { 'taken', ARGV[i], holder } end
end
local wanted = {}
for i = 2, #ARGV do wanted[ARGV[i]] = true end
local before = redis.call('HGET', KEYS[2], owner)
if before then
  for address in string.gmatch(before, '%S+') do
    if not wanted[address] and redis.call('HGET', KEYS[1], address) == owner then
      redis.call('HDEL', KEYS[1], address)
    end
  end
end
if #ARGV < 2 then
  redis.call('HDEL', KEYS[2], owner)
  return { 'ok' }
end
local held = {}
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], owner)
  held[#held + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], owner, table.concat(held, ' '))
return { 'ok' }

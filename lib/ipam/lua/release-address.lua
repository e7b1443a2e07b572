--[[
  Takes back the address an owner holds, clearing its pool's busy bit unless the address
  is also excluded (gateway, network/broadcast, externally reserved).

  KEYS[1]  meta hash: version
  KEYS[2]  owners hash: owner -> address hex
  KEYS[3]  holders hash: address hex -> owner
  KEYS[4 ..] per pool: excl, busy

  ARGV[1]  expected definition version
  ARGV[2]  owner
  ARGV[3]  number of pools
  then per pool: startHex, endHex

  Returns {'ok', addressHex} | {'none'} (the owner held nothing) | {'stale', version}
]]
local hex = redis.call('HGET', KEYS[2], ARGV[2])
if not hex then
  return {'none'}
end
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return {'stale', version}
end
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[3], hex) == ARGV[2] then
  redis.call('HDEL', KEYS[3], hex)
end
for p = 0, tonumber(ARGV[3]) - 1 do
  local s = ARGV[4 + p * 2]
  local e = ARGV[5 + p * 2]
  if #hex == #s and hex >= s and hex <= e then
    local pos = tonumber(string.sub(hex, -8), 16) - tonumber(string.sub(s, -8), 16)
    if pos < 0 then pos = pos + 4294967296 end
    if redis.call('GETBIT', KEYS[4 + p * 2], pos) == 0 then
      redis.call('SETBIT', KEYS[5 + p * 2], pos, 0)
    end
    break
  end
end
return {'ok', hex}

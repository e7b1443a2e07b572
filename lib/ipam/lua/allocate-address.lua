--[[
  Gives the owner one explicit address. The caller has already checked, against the
  definition of the expected version, that the address lies in a subnet and may be
  handed out; this script guards that version and who holds the address.

  KEYS[1]  meta hash: version
  KEYS[2]  owners hash: owner -> address hex
  KEYS[3]  holders hash: address hex -> owner
  KEYS[4]  busy bitmap of the pool holding the address (only when ARGV[4] >= 0)

  ARGV[1]  expected definition version
  ARGV[2]  owner
  ARGV[3]  address hex
  ARGV[4]  bit offset of the address in its pool, or -1 when it lies in no pool

  Returns {'ok', addressHex} | {'held', addressHex} (the owner holds another address)
        | {'taken', holder} | {'stale', version}
]]
local held = redis.call('HGET', KEYS[2], ARGV[2])
if held then
  if held == ARGV[3] then return {'ok', held} end
  return {'held', held}
end
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return {'stale', version}
end
local holder = redis.call('HGET', KEYS[3], ARGV[3])
if holder then
  return {'taken', holder}
end
redis.call('HSET', KEYS[3], ARGV[3], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local pos = tonumber(ARGV[4])
if pos >= 0 then
  redis.call('SETBIT', KEYS[4], pos, 1)
end
return {'ok', ARGV[3]}

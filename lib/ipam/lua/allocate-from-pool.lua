--[[
  Gives the owner the first free address of the first pool (in the order given) that
  has one. An owner that already holds an address gets that address back.

  KEYS[1]  meta hash: version
  KEYS[2]  owners hash: owner -> address hex
  KEYS[3]  holders hash: address hex -> owner
  KEYS[4 ..] per candidate pool: res (held by owners), busy (held or excluded)

  ARGV[1]  expected definition version
  ARGV[2]  owner
  ARGV[3]  number of candidate pools
  then per pool: startHex, size, pool index

  Returns {'ok', addressHex, poolIndex} | {'held', addressHex} | {'stale', version}
        | {'exhausted'}
]]
local held = redis.call('HGET', KEYS[2], ARGV[2])
if held then
  return {'held', held}
end
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return {'stale', version}
end

-- Adds n (< 2^32) to a fixed-width hex address, carrying through 32-bit chunks.
local function add(hex, n)
  if #hex == 8 then
    return string.format('%08x', tonumber(hex, 16) + n)
  end
  local out = {}
  local carry = n
  for i = #hex - 7, 1, -8 do
    local v = tonumber(string.sub(hex, i, i + 7), 16) + carry
    carry = math.floor(v / 4294967296)
    table.insert(out, 1, string.format('%08x', v % 4294967296))
  end
  return table.concat(out)
end

-- The busy bitmap is kept equal to (held or excluded) by every script, so its first
-- clear bit below the pool's size is free.
for p = 0, tonumber(ARGV[3]) - 1 do
  local busy = KEYS[5 + p * 2]
  local size = tonumber(ARGV[5 + p * 3])
  local pos = redis.call('BITPOS', busy, 0)
  if pos >= 0 and pos < size then
    local hex = add(ARGV[4 + p * 3], pos)
    redis.call('SETBIT', busy, pos, 1)
    redis.call('SETBIT', KEYS[4 + p * 2], pos, 1)
    redis.call('HSET', KEYS[3], hex, ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[2], hex)
    return {'ok', hex, ARGV[6 + p * 3]}
  end
end
return {'exhausted'}

--[[
  Gives the owner the first free address of the first pool (in the order given) that
  has one. An owner that already holds an address gets that address back.

  KEYS[1]  meta hash: version
  KEYS[2]  owners hash: owner -> address hex
  KEYS[3]  holders hash: address hex -> owner
  KEYS[4 ..] per candidate pool: its busy bitmap (held or excluded)

  ARGV[1]  expected definition version
  ARGV[2]  owner
  then per candidate pool: startHex, size

  Returns {'ok', addressHex} | {'held', addressHex} | {'stale', version} | {'exhausted'}
]]
local held = redis.call('HGET', KEYS[2], ARGV[2])
if held then
  return {'held', held}
end
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return {'stale', version}
end

-- Every script keeps the busy bitmap equal to (held or excluded), so its first clear bit
-- below the pool's size is free.
for p = 4, #KEYS do
  local pos = redis.call('BITPOS', KEYS[p], 0)
  local start = ARGV[p * 2 - 5]
  if pos >= 0 and pos < tonumber(ARGV[p * 2 - 4]) then
    local hex
    if #start == 8 then
      hex = string.format('%08x', tonumber(start, 16) + pos)
    else
      -- IPv6: add pos (< 2^32) through 32-bit chunks, carrying.
      local out = {}
      local carry = pos
      for i = #start - 7, 1, -8 do
        local v = tonumber(string.sub(start, i, i + 7), 16) + carry
        carry = math.floor(v / 4294967296)
        out[(i + 7) / 8] = string.format('%08x', v % 4294967296)
      end
      hex = table.concat(out)
    end
    redis.call('SETBIT', KEYS[p], pos, 1)
    redis.call('HSET', KEYS[3], hex, ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[2], hex)
    return {'ok', hex}
  end
end
return {'exhausted'}

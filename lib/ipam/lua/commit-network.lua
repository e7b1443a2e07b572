--[[
  Replaces (or deletes) a network's definition and rebuilds every pool bitmap from the
  addresses currently held, in one step. Holders named with the release prefix give back
  what they hold inside the release ranges in that same step, so that no allocation can
  come between the give-back and the new definition.

  KEYS[1]  meta hash: version, def
  KEYS[2]  owners hash: owner -> address hex
  KEYS[3]  holders hash: address hex -> owner
  KEYS[4 .. 3+nOld]           bitmap keys of the current pools (deleted)
  KEYS[4+nOld ..]             per new pool: excl, busy

  ARGV[1]  expected version (the one read; a network that does not exist has the version
           it was deleted at, or '0' if it never existed)
  ARGV[2]  new definition JSON ('' = delete the network)
  ARGV[3]  nOld: number of current pool bitmap keys
  ARGV[4]  nNew: number of new pools
  ARGV[5]  nCheck: number of ranges that must hold no address
  ARGV[6]  force: '1' deletes the network even while addresses are held
  ARGV[7]  nRelease: number of ranges whose holders with the release prefix give them back
  ARGV[8]  release prefix: owners whose name starts with it ('' = none)
  then per new pool:      startHex, endHex, exclusion bitmap (padding bits set)
  then per check range:   startHex, endHex
  then per release range: startHex, endHex

  Returns {'ok', newVersion, (owner, addressHex) per address given back}
        | {'stale', currentVersion} | {'busy', owner, addressHex}
  Address hex is fixed width (8 digits IPv4, 32 IPv6), so string order is numeric order.
]]
local current = redis.call('HGET', KEYS[1], 'version') or '0'
if current ~= ARGV[1] then
  return {'stale', current}
end

local nOld = tonumber(ARGV[3])
local nNew = tonumber(ARGV[4])
local nCheck = tonumber(ARGV[5])
local nRelease = tonumber(ARGV[7])
local prefix = ARGV[8]
local holders = redis.call('HGETALL', KEYS[3])

local function within(hex, s, e)
  return #hex == #s and hex >= s and hex <= e
end

-- Offset of hex from s; pools are smaller than 2^32 addresses, so the low 32 bits suffice.
local function offset(hex, s)
  local d = tonumber(string.sub(hex, -8), 16) - tonumber(string.sub(s, -8), 16)
  if d < 0 then d = d + 4294967296 end
  return d
end

if ARGV[2] == '' then
  if ARGV[6] ~= '1' and #holders > 0 then
    return {'busy', holders[2], holders[1]}
  end
  local doomed = {KEYS[2], KEYS[3]}
  for i = 1, nOld do doomed[#doomed + 1] = KEYS[3 + i] end
  redis.call('DEL', unpack(doomed))
  -- The version survives the definition: a network created again under the same id gets
  -- a new version, so another process's cached copy of the old one is seen as stale.
  redis.call('HDEL', KEYS[1], 'def')
  return {'ok', tostring(redis.call('HINCRBY', KEYS[1], 'version', 1))}
end

local checkBase = 9 + nNew * 3
local releaseBase = checkBase + nCheck * 2

local function released(hex, owner)
  if prefix == '' or string.sub(owner, 1, #prefix) ~= prefix then return false end
  for r = 0, nRelease - 1 do
    if within(hex, ARGV[releaseBase + r * 2], ARGV[releaseBase + r * 2 + 1]) then return true end
  end
  return false
end

-- Refused before anything is written: a script's writes are not rolled back.
for c = 0, nCheck - 1 do
  local s = ARGV[checkBase + c * 2]
  local e = ARGV[checkBase + c * 2 + 1]
  for h = 1, #holders, 2 do
    if within(holders[h], s, e) and not released(holders[h], holders[h + 1]) then
      return {'busy', holders[h + 1], holders[h]}
    end
  end
end

local reply = {'ok', ''}
local kept = {}
for h = 1, #holders, 2 do
  if released(holders[h], holders[h + 1]) then
    redis.call('HDEL', KEYS[3], holders[h])
    redis.call('HDEL', KEYS[2], holders[h + 1])
    reply[#reply + 1] = holders[h + 1]
    reply[#reply + 1] = holders[h]
  else
    kept[#kept + 1] = holders[h]
  end
end

for i = 1, nOld do redis.call('DEL', KEYS[3 + i]) end

-- busy = excluded or held: the exclusion bitmap, then one bit per address kept.
for p = 0, nNew - 1 do
  local excl = KEYS[4 + nOld + p * 2]
  local busy = KEYS[5 + nOld + p * 2]
  local s = ARGV[9 + p * 3]
  local e = ARGV[10 + p * 3]
  redis.call('SET', excl, ARGV[11 + p * 3])
  redis.call('SET', busy, ARGV[11 + p * 3])
  for _, hex in ipairs(kept) do
    if within(hex, s, e) then
      redis.call('SETBIT', busy, offset(hex, s), 1)
    end
  end
end

local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'def', ARGV[2])
reply[2] = tostring(version)
return reply

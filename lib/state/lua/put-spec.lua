--[[
  Writes an object's desired spec. An unchanged spec changes nothing; a changed one bumps
  specVersion. Immutable parts may not change; exclusive claims (e.g. a DPU NAT IP) may
  not be held by another object; claims the new spec no longer makes are released;
  guards (facts the spec was validated against) must still hold, and quota guards hold a
  new member of a counted set (a tenant's groups, hosts, PublicAccess hosts) to a limit.

  KEYS[1]            object hash (fields: spec, specVersion, status, deletion, createdAt,
                     updatedAt, immutable, claims)
  KEYS[2]            version counter of this kind and name; it outlives the object (until
                     the old object's jobs are gone), so an object deleted and created again
                     never reuses a version (job ids derive from versions and must not
                     collide with the old object's jobs)
  KEYS[3..n+2]       index sets the object's name is added to (n = ARGV[6])
  KEYS[n+3..n+c+2]   claim keys (string: owner name) the new spec takes (c = ARGV[8])
  KEYS[n+c+3..n+c+g+2]  guard keys, one per entry of ARGV[9] (g entries)
  KEYS[n+c+g+3..]    sets the object's name is removed from when the spec changes (r =
                     ARGV[10]; e.g. a host that is no longer PublicAccess)

  ARGV[1]  name
  ARGV[2]  spec (canonical JSON)
  ARGV[3]  now (ISO time)
  ARGV[4]  initial status (JSON), used only when the object is new
  ARGV[5]  immutable fingerprint (the parts of the spec that may never change)
  ARGV[6]  n, the number of index sets
  ARGV[7]  claim key prefix: old claims are released only if they start with it
  ARGV[8]  c, the number of claim keys
  ARGV[9]  guards (JSON array, one per guard key): {"absent": true} — the key must not
           exist; {"live": true} — the object hash must exist with no deletion requested;
           {"field": F, "equals": V} — the hash field F must equal V;
           {"fewerThan": N} — the set holds the name already, or fewer than N members;
           {"fewerThan": N, "member": M} — the same for M instead of the name, and M
           joins the set once every check passed (a host taking its group's central
           slot), even when the spec is unchanged
  ARGV[10] r, the number of sets to remove the name from (default 0)
  ARGV[11] (optional) how many entries the store's change log keeps, about (`XADD MAXLEN ~`):
           a changed spec is then announced there by this same step, never one without the
           other; the log is the last key (KEYS[#KEYS]) and ARGV[12..] the change's fields

  Returns {'ok', changed (0|1), specVersion}
        | {'terminating'}               deletion was requested; the object is read-only
        | {'immutable', old fingerprint}
        | {'claimed', key, holder}      another object holds a claim
        | {'guard', key}                a guard no longer holds: re-read and try again
        | {'quota', key}                a fewerThan guard: the set is full (nothing written)
]]
local obj = KEYS[1]
local n = tonumber(ARGV[6])
local c = tonumber(ARGV[8] or '0')
local guards = cjson.decode(ARGV[9] or '[]')
local existing = redis.call('HMGET', obj, 'spec', 'specVersion', 'deletion', 'immutable', 'claims')

if existing[1] then
  if existing[3] then return {'terminating'} end
  if existing[4] ~= ARGV[5] then return {'immutable', existing[4]} end
end

for i, guard in ipairs(guards) do
  local key = KEYS[n + c + 2 + i]
  if guard.absent then
    if redis.call('EXISTS', key) == 1 then return {'guard', key} end
  elseif guard.live then
    if redis.call('EXISTS', key) == 0 or redis.call('HEXISTS', key, 'deletion') == 1 then
      return {'guard', key}
    end
  elseif guard.fewerThan then
    if redis.call('SISMEMBER', key, guard.member or ARGV[1]) == 0
       and redis.call('SCARD', key) >= guard.fewerThan then
      return {'quota', key}
    end
  elseif redis.call('HGET', key, guard.field) ~= guard.equals then
    return {'guard', key}
  end
end

for i = n + 3, n + c + 2 do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then return {'claimed', KEYS[i], holder} end
end

for i, guard in ipairs(guards) do
  if guard.member then redis.call('SADD', KEYS[n + c + 2 + i], guard.member) end
end

if existing[1] == ARGV[2] then
  return {'ok', 0, tonumber(existing[2])}
end

-- Release claims the new spec no longer makes.
local newClaims = {}
for i = n + 3, n + c + 2 do newClaims[KEYS[i]] = true end
if existing[5] then
  for _, key in ipairs(cjson.decode(existing[5])) do
    if not newClaims[key] and string.sub(key, 1, #ARGV[7]) == ARGV[7]
       and redis.call('GET', key) == ARGV[1] then
      redis.call('DEL', key)
    end
  end
end
local claimList = {}
for i = n + 3, n + c + 2 do
  redis.call('SET', KEYS[i], ARGV[1])
  table.insert(claimList, KEYS[i])
end

local version = redis.call('INCR', KEYS[2])
-- The counter of a purged object expires once its jobs are gone; a live one keeps it.
redis.call('PERSIST', KEYS[2])
if not existing[1] then
  redis.call('HSET', obj, 'createdAt', ARGV[3], 'status', ARGV[4])
end
redis.call('HSET', obj, 'spec', ARGV[2], 'specVersion', version, 'updatedAt', ARGV[3],
  'immutable', ARGV[5], 'claims', #claimList > 0 and cjson.encode(claimList) or '[]')
for i = 3, n + 2 do redis.call('SADD', KEYS[i], ARGV[1]) end
local r = tonumber(ARGV[10] or '0')
for i = n + c + #guards + 3, n + c + #guards + r + 2 do redis.call('SREM', KEYS[i], ARGV[1]) end
if ARGV[11] then
  redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[11], '*', unpack(ARGV, 12))
end
return {'ok', 1, version}

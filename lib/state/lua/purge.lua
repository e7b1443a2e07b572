--[[
  Removes an object for good: its hash, its name from the index sets, and the claims it
  still holds — unless a guard key still exists (e.g. the set of hosts a DPU serves).

  KEYS[1]          object hash
  KEYS[2..n+1]     index sets to remove the name from (n = ARGV[2], default all of KEYS)
  KEYS[n+2..]      guard keys: none of them may exist; with ARGV[3] = 'log', the last key
                   is the change log instead (a stream), not a guard

  ARGV[1]  name
  ARGV[2]  n, the number of index sets
  ARGV[3]  'log': the removal is appended to the change log in the same step, so no reader
           finds the object gone before the log says so
  ARGV[4]  the change log's approximate length bound (MAXLEN ~)
  ARGV[5..] the change's fields

  Returns 1 when the object existed and was removed, 0 when there was none, or
  {'guard', key} when a guard key exists (nothing changed).
]]
local log = ARGV[3] == 'log' and KEYS[#KEYS] or nil
local last = log and #KEYS - 1 or #KEYS
local n = tonumber(ARGV[2] or tostring(last - 1))
for i = n + 2, last do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {'guard', KEYS[i]} end
end
local claims = redis.call('HGET', KEYS[1], 'claims')
if claims then
  for _, key in ipairs(cjson.decode(claims)) do
    if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
  end
end
for i = 2, n + 1 do redis.call('SREM', KEYS[i], ARGV[1]) end
local removed = redis.call('DEL', KEYS[1])
if log then
  redis.call('XADD', log, 'MAXLEN', '~', ARGV[4], '*', unpack(ARGV, 5))
end
return removed

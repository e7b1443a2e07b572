--[[
  Compare-and-set of one JSON field of an object hash, guarded by a revision counter
  (`<field>Rev`), so that concurrent read-modify-write cycles never lose an update.

  KEYS[1]  object hash
  KEYS[2]  (optional) the object's event list: ARGV[5..] are pushed onto it with the write,
           so that whoever reads the new value can read the events it made too

  ARGV[1]  field (e.g. 'status' or 'deletion')
  ARGV[2]  revision the caller read ('0' when the field had none)
  ARGV[3]  new value
  ARGV[4]  (with KEYS[2]) how many events the list keeps
  ARGV[5..] (with KEYS[2]) the events, oldest first

  Returns 1 when written, 0 when the revision moved on (re-read and retry), -1 when the
  object does not exist.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local revField = ARGV[1] .. 'Rev'
local rev = redis.call('HGET', KEYS[1], revField) or '0'
if rev ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], revField, tonumber(rev) + 1)
if KEYS[2] and #ARGV > 4 then
  redis.call('LPUSH', KEYS[2], unpack(ARGV, 5))
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
end
return 1

--[[
  Compare-and-set of one JSON field of an object hash, guarded by the object's revision
  (what `revisions.lua` answers: its spec version and times, the revisions of its status
  and deletion), so that concurrent read-modify-write cycles never lose an update and a
  value computed from an object that changed meanwhile is never written. The field's own
  revision counter (`<field>Rev`) goes up by one. The change is announced in the store's
  change log by the same step, never one without the other.

  KEYS[1]  object hash
  KEYS[2]  the store's change log (a stream)
  KEYS[3]  (optional) the object's event list: ARGV[f+6..] are pushed onto it with the
           write, so that whoever reads the new value can read the events it made too

  ARGV[1]  field (e.g. 'status' or 'deletion')
  ARGV[2]  the object's revision the caller read
           (`specVersion|updatedAt|createdAt|statusRev|deletionRev`)
  ARGV[3]  new value
  ARGV[4]  how many entries the change log keeps, about (`XADD MAXLEN ~`)
  ARGV[5]  f, the number of the change's fields
  ARGV[6..f+5]      the change's fields (`kind`, its kind, `name`, its name)
  ARGV[f+6]         (with KEYS[3]) how many events the list keeps
  ARGV[f+7..]       (with KEYS[3]) the events, oldest first

  Returns 1 when written, 0 when the object changed since (re-read and retry), -1 when the
  object does not exist.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local revField = ARGV[1] .. 'Rev'
local v = redis.call('HMGET', KEYS[1], 'specVersion', 'updatedAt', 'createdAt', 'statusRev',
  'deletionRev', revField)
local revision = table.concat({ v[1] or '', v[2] or '', v[3] or '', v[4] or '0', v[5] or '0' }, '|')
if revision ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], revField, tonumber(v[6] or '0') + 1)
local f = tonumber(ARGV[5])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', unpack(ARGV, 6, f + 5))
if KEYS[3] and #ARGV > f + 6 then
  redis.call('LPUSH', KEYS[3], unpack(ARGV, f + 7))
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[f + 6]) - 1)
end
return 1

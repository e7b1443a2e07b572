--[[
  The revision of each object hash: what changes whenever anything a reader decodes does
  (its spec version and times, the revisions of its status and deletion), so that a reader
  keeping objects decoded reads again only those whose revision moved on.

  KEYS[1..n]  object hashes

  Returns one string per key, in order: `specVersion|updatedAt|createdAt|statusRev|deletionRev`,
  or '' for an object that does not exist.
]]
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.call('HMGET', key, 'specVersion', 'updatedAt', 'createdAt', 'statusRev',
    'deletionRev')
  if v[1] then
    out[i] = table.concat({ v[1], v[2] or '', v[3] or '', v[4] or '0', v[5] or '0' }, '|')
  else
    out[i] = ''
  end
end
return out

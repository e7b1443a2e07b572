--[[
  Reads the change log after a resource version, when the log still holds every entry
  after it. The log is trimmed from its oldest end only (XADD MAXLEN ~), so it does when
  that version is not older than its oldest entry, or when nothing was ever trimmed.

  KEYS[1]  the change log (a stream)

  ARGV[1]  after: a stream id, `ms-seq`
  ARGV[2]  count: the most entries to return

  Returns {'ok', entries}, entries as XRANGE gives them ({id, {field, value, ...}}, ...;
  none when nothing changed since), or {'gone'} when entries after ARGV[1] were trimmed.
]]
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function before(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end

local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if first and before(ARGV[1], first[1]) then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local length, added
  for i = 1, #info, 2 do
    if info[i] == 'length' then length = info[i + 1] end
    if info[i] == 'entries-added' then added = info[i + 1] end
  end
  if added ~= length then return {'gone'} end
end
return {'ok', redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])}

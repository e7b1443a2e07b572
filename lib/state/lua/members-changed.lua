--[[
  The hosts of one group that changed after a resource version, read from the store's
  change log (every change of an object is appended there by the script that makes it):
  for a reader that keeps the group's hosts decoded and needs to read again only those.

  KEYS[1]  the store's change log (a stream)
  KEYS[2]  the group's members set

  ARGV[1]  after: the log's version the reader's kept hosts are as fresh as (`ms-seq`)
  ARGV[2]  kind: the kind of the members' objects ('mr')
  ARGV[3]  most: the most log entries to look at; past it the reader reads the group whole

  Returns {'ok', version, name, ...}: the version the reader is now as fresh as (the last
  entry looked at, or ARGV[1] when there was none), then the names of that kind changed
  after ARGV[1] that are members of the group or were removed for good (a reader drops
  those it kept), each once; {'gone'} when the log no longer holds every entry after
  ARGV[1] (trimmed, or a log that restarted below it: a store replaced); {'many'} when
  more than ARGV[3] entries came after it.
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

local after = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then
  if after == '0-0' then return {'ok', after} end
  return {'gone'}
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local length, added, last
for i = 1, #info, 2 do
  if info[i] == 'length' then length = info[i + 1] end
  if info[i] == 'entries-added' then added = info[i + 1] end
  if info[i] == 'last-generated-id' then last = info[i + 1] end
end
if before(last, after) then return {'gone'} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if first and before(after, first[1]) and added ~= length then return {'gone'} end

local most = tonumber(ARGV[3])
local entries = redis.call('XRANGE', KEYS[1], '(' .. after, '+', 'COUNT', most + 1)
if #entries > most then return {'many'} end

local out = {'ok', after}
local seen = {}
for _, entry in ipairs(entries) do
  out[2] = entry[1]
  local fields = entry[2]
  local kind, name, removed
  for i = 1, #fields, 2 do
    local field = fields[i]
    if field == 'kind' then kind = fields[i + 1]
    elseif field == 'name' then name = fields[i + 1]
    elseif field == 'removed' then removed = true end
  end
  if kind == ARGV[2] and name and not seen[name] then
    if removed or redis.call('SISMEMBER', KEYS[2], name) == 1 then
      seen[name] = true
      table.insert(out, name)
    end
  end
end
return out

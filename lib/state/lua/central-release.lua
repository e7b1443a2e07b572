--[[
  Gives back a group's central slot when the group has been without hosts for the grace
  period: the caller stops the central only when this says 'released'. Atomic with the
  host writes (put-spec.lua takes a slot, purge.lua empties the members), so a host that
  arrives a moment before keeps the central, and one that arrives a moment after takes a
  slot again (and its attach starts the central again).

  KEYS[1]  the set of groups holding a central slot (`StoreKeys.centrals`)
  KEYS[2]  the hash group → ms since the group has had no host (`StoreKeys.centralsIdle`)
  KEYS[3]  the group's members set

  ARGV[1]  group
  ARGV[2]  now (ms since the epoch)
  ARGV[3]  grace (ms)

  Returns 'released'
        | 'not-held'   the group holds no slot (its central was stopped already)
        | 'busy'       the group has hosts
        | 'recent'     its last host left less than the grace ago (a later stop decides)
]]
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 'not-held' end
if redis.call('SCARD', KEYS[3]) > 0 then return 'busy' end
-- No mark: its last host's detach has not written it yet (it schedules its own stop).
local since = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '')
if not since or since + tonumber(ARGV[3]) > tonumber(ARGV[2]) then return 'recent' end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 'released'

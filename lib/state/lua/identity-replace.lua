--[[
  Replaces a DPU's identity certificate only while the one on record is still the one
  the caller decided from: two replacements decided from one reading cannot both land,
  and a slower one cannot put back a certificate older than the one recorded meanwhile.

  KEYS[1]  the DPU's identity (string, PEM)
  ARGV[1]  the certificate the caller read ('' when there was none)
  ARGV[2]  the new certificate

  Returns 1 when replaced, 0 when the record changed since it was read.
]]
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1

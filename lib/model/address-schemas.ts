/**
 * The address formats of the model's fields (`objects.ts`): an IPv4 or IPv6 address,
 * either, a group's network (CIDR) and a host's MAC. An IPv6 address is stored in its
 * canonical form, a MAC in lower case.
 */
import { isIP } from 'node:net'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'
import { canonicalIp } from '../ipam/address.ts'

export const Ipv4 = v.pipe(
  v.string(),
  v.check((s) => isIP(s) === 4, 'must be an IPv4 address'),
  v.examples(['10.0.0.1']),
)
export const Ipv6 = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) === 6 && !s.includes('%'), 'must be an IPv6 address (no zone)'),
  v.metadata({ format: 'ipv6', examples: ['fd00:fab::105'] }),
  v.transform(canonicalIp),
)
export const IpAddress = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) !== 0, 'must be an IP address'),
  v.examples(['10.0.0.1']),
)
/**
 * The widest networks a group may have: an IPv4 network's pool covers all of it, and IPAM
 * keeps pools under 2^20 addresses (/12); IPv6 pools are bounded, but a network wider
 * than a /48 is a site's, not a tenant's.
 */
export const MIN_PREFIX = { v4: 12, v6: 48 } as const

const isCidr = (s: string) => /^[0-9a-fA-F:.]+\/\d{1,3}$/.test(s) && IPCIDR.isValidCIDR(s)

export const Cidr = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for a CIDR'),
  v.check(isCidr, 'must be a CIDR'),
  v.check((s) => {
    const [addr = ''] = s.split('/')
    // valibot runs every check even after one failed: a malformed CIDR reaches here too,
    // and the check above already reports it.
    if (!isCidr(s)) return true
    const host = new IPCIDR(`${addr}/${isIP(addr) === 6 ? 128 : 32}`)
    return new IPCIDR(s).start({ type: 'bigInteger' }) === host.start({ type: 'bigInteger' })
  }, 'must be a network address: no host bits set after the prefix'),
  v.check((s) => {
    const [addr = '', length = ''] = s.split('/')
    const prefix = Number(length)
    if (!isCidr(s)) return true
    return isIP(addr) === 6
      ? prefix >= MIN_PREFIX.v6 && prefix <= 126
      : prefix >= MIN_PREFIX.v4 && prefix <= 30
  }, `must be an IPv4 network from /${MIN_PREFIX.v4} to /30 or an IPv6 network from /${MIN_PREFIX.v6} to /126`),
  v.examples(['10.0.0.0/24']),
)
export const Mac = v.pipe(
  v.string(),
  v.regex(/^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/, 'must be a MAC address like 52:54:00:12:34:56'),
  v.check((s) => (Number.parseInt(s.slice(0, 2), 16) & 1) === 0, 'must be a unicast MAC address'),
  v.examples(['52:54:00:12:34:56']),
  v.transform((s) => s.toLowerCase()),
)

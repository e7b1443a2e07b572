import t from 'tap'
import {
  canonicalIp,
  eui64Address,
  formatSpan,
  fromHex,
  parseCidr,
  parseIp,
  parseSpan,
  subtract,
  toHex,
} from './address.ts'
import { InvalidRequest } from './errors.ts'

t.test('addresses print canonically and round-trip through hex keys', async (t) => {
  const cases = [
    { input: '10.0.0.1', canonical: '10.0.0.1', hex: '0a000001' },
    { input: '255.255.255.255', canonical: '255.255.255.255', hex: 'ffffffff' },
    {
      input: '2001:DB8:0:0:0:0:0:1',
      canonical: '2001:db8::1',
      hex: '20010db8000000000000000000000001',
    },
    {
      input: '2001:db8:0:1:0:0:0:0',
      canonical: '2001:db8:0:1::',
      hex: '20010db8000000010000000000000000',
    },
    { input: '::', canonical: '::', hex: '0'.repeat(32) },
    {
      input: '::ffff:192.0.2.1',
      canonical: '::ffff:c000:201',
      hex: '00000000000000000000ffffc0000201',
    },
    {
      input: '2001:0:0:1:0:0:0:1',
      canonical: '2001:0:0:1::1',
      hex: '20010000000000010000000000000001',
    },
    { input: 'fe80::1:0:0:1', canonical: 'fe80::1:0:0:1', hex: 'fe800000000000000001000000000001' },
  ]
  for (const c of cases) {
    t.equal(canonicalIp(c.input), c.canonical, `${c.input} prints as ${c.canonical}`)
    t.equal(toHex(parseIp(c.input)), c.hex, `${c.input} keys as ${c.hex}`)
    t.same(fromHex(c.hex), parseIp(c.input), `${c.hex} reads back`)
  }
})

t.test('malformed input is an InvalidRequest', async (t) => {
  const bad: [string, () => unknown][] = [
    ['not an address', () => parseIp('10.0.0')],
    ['zone ids', () => parseIp('fe80::1%eth0')],
    ['host bits set', () => parseCidr('10.0.0.1/24')],
    ['missing prefix', () => parseCidr('10.0.0.0')],
    ['prefix too long', () => parseCidr('10.0.0.0/33')],
    ['mixed versions', () => parseSpan('10.0.0.1', '::1')],
    ['backwards range', () => parseSpan('10.0.0.9', '10.0.0.1')],
  ]
  for (const [name, f] of bad) t.throws(f, InvalidRequest, name)
})

t.test('subtracting a range leaves zero, one or two parts', async (t) => {
  const pool = parseSpan('192.0.2.10', '192.0.2.100')
  const cases = [
    {
      cut: ['192.0.2.20', '192.0.2.50'],
      parts: ['192.0.2.10-192.0.2.19', '192.0.2.51-192.0.2.100'],
    },
    { cut: ['192.0.2.1', '192.0.2.10'], parts: ['192.0.2.11-192.0.2.100'] },
    { cut: ['192.0.2.100', '192.0.2.200'], parts: ['192.0.2.10-192.0.2.99'] },
    { cut: ['192.0.2.0', '192.0.2.255'], parts: [] },
    { cut: ['192.0.2.101', '192.0.2.200'], parts: ['192.0.2.10-192.0.2.100'] },
  ]
  for (const c of cases) {
    const [a = '', b = ''] = c.cut
    t.same(subtract(pool, parseSpan(a, b)).map(formatSpan), c.parts, `minus ${a}-${b}`)
  }
})

t.test("a host's SLAAC address: its modified EUI-64 identifier in the /64", async (t) => {
  const cases = [
    // The kernel's own choice for these MACs (`ip -6 addr` on a link with an RA).
    { cidr: 'fd00:10::/64', mac: '0a:00:00:00:00:01', ip: 'fd00:10::800:ff:fe00:1' },
    { cidr: '2001:db8:1:2::/64', mac: '52:54:00:12:34:56', ip: '2001:db8:1:2:5054:ff:fe12:3456' },
    // The universal/local bit is flipped, not set: a locally administered MAC clears it.
    { cidr: 'fd00::/64', mac: '02:00:00:00:00:ff', ip: 'fd00::ff:fe00:ff' },
  ]
  for (const c of cases) t.equal(eui64Address(c.cidr, c.mac), c.ip, `${c.mac} in ${c.cidr}`)
  for (const cidr of ['fd00::/56', '10.0.0.0/24']) {
    t.throws(() => eui64Address(cidr, '0a:00:00:00:00:01'), InvalidRequest, `${cidr}: not a /64`)
  }
  t.throws(() => eui64Address('fd00::/64', '0a:00:00:00:01'), InvalidRequest, 'a short MAC')
})

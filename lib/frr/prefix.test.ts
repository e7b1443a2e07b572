import t from 'tap'
import {
  announcementProblem,
  canonicalIp,
  InvalidAnnouncementError,
  ipFamily,
  prefixFamily,
  publicPrefix,
} from './index.ts'

t.test('publicPrefix: /32 for IPv4, /128 for IPv6, written as FRR writes it', async (t) => {
  const cases: [string, string][] = [
    ['203.0.113.7', '203.0.113.7/32'],
    ['2001:db8:ff::5', '2001:db8:ff::5/128'],
    ['2001:DB8:ff:0:0:0:0:5', '2001:db8:ff::5/128'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1/128'],
    ['2001:0db8::0001', '2001:db8::1/128'],
  ]
  for (const [ip, prefix] of cases) t.equal(publicPrefix(ip), prefix, ip)
  for (const bad of ['', '203.0.113.7/32', '010.0.0.1', 'fe80::1%eth0', 'host-a']) {
    t.throws(() => publicPrefix(bad), InvalidAnnouncementError, `${JSON.stringify(bad)} refused`)
  }
})

t.test('canonicalIp, ipFamily, prefixFamily', async (t) => {
  t.equal(canonicalIp('fd00:77:0::105'), 'fd00:77::105')
  t.equal(canonicalIp('10.77.0.105'), '10.77.0.105')
  t.equal(canonicalIp('10.77.0.105/32'), undefined)
  t.equal(ipFamily('10.77.0.105'), 'ipv4')
  t.equal(ipFamily('fd00:77::105'), 'ipv6')
  t.equal(ipFamily('fe80::1%eth0'), undefined, 'a zoned address is no next hop')
  t.equal(prefixFamily('203.0.113.7/32'), 'ipv4')
  t.equal(prefixFamily('2001:db8:ff::5/128'), 'ipv6')
})

t.test('announcementProblem: what Hydrazine can announce, and why not', async (t) => {
  const cases: [string, string | null, RegExp | undefined][] = [
    ['203.0.113.7/32', '10.77.0.105', undefined],
    ['2001:db8:ff::5/128', 'fd00:77::105', undefined],
    ['2001:db8:ff::5/128', null, undefined],
    ['2001:db8:ff::5/128', '10.77.0.105', /next hop 10\.77\.0\.105 is not an IPv6 address/],
    ['203.0.113.7/32', 'fd00:77::105', /next hop fd00:77::105 is not an IPv4 address/],
    ['203.0.113.7/128', '10.77.0.105', /announced as 203\.0\.113\.7\/32/],
    ['2001:db8:ff::5/64', 'fd00:77::105', /announced as 2001:db8:ff::5\/128/],
    ['2001:DB8:ff::5/128', 'fd00:77::105', /announced as 2001:db8:ff::5\/128/],
    ['2001:db8:ff::5/128', 'FD00:77::105', /write next hop FD00:77::105 as fd00:77::105/],
    ['2001:db8:ff::5/128', 'fe80::1%eth0', /not an IPv6 address/],
    ['203.0.113.7', '10.77.0.105', /not an IPv4 \/32 or IPv6 \/128 prefix/],
    ['', null, /not an IPv4 \/32 or IPv6 \/128 prefix/],
  ]
  for (const [prefix, nextHop, problem] of cases) {
    const found = announcementProblem(prefix, nextHop)
    const name = `${prefix} via ${nextHop}`
    if (problem === undefined) t.equal(found, undefined, name)
    else t.match(found, problem, name)
  }
})

import t from 'tap'
import * as v from 'valibot'
import { TraceRequest } from './trace.ts'

t.test('what a trace request may ask', async (t) => {
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['a host to a host', { from: 'h1', to: 'h2' }, []],
    ['a host to an address, by TCP', { from: 'h1', to: '10.0.0.3', proto: 'tcp', port: 22 }, []],
    ['a host to an IPv6 address', { from: 'h1', to: 'fd00::3' }, []],
    ['the fabric to a public IP', { from: 'fabric', to: '203.0.113.7', raw: true }, []],
    ['from nothing known', { from: 'Host_1', to: 'h2' }, ['from']],
    ['to nothing known', { from: 'h1', to: '10.0.0' }, ['to']],
    ['the fabric to a host name', { from: 'fabric', to: 'h2' }, ['to']],
    ['the fabric to IPv6', { from: 'fabric', to: 'fd00::3' }, []],
    ['the fabric to a zoned IPv6 address', { from: 'fabric', to: 'fe80::3%eth0' }, ['to']],
    ['an unknown protocol', { from: 'h1', to: 'h2', proto: 'sctp' }, ['proto']],
    ['TCP without a port', { from: 'h1', to: 'h2', proto: 'udp' }, ['port']],
    ['ICMP with a port', { from: 'h1', to: 'h2', port: 80 }, ['port']],
    ['port 0', { from: 'h1', to: 'h2', proto: 'tcp', port: 0 }, ['port']],
    ['a fractional port', { from: 'h1', to: 'h2', proto: 'tcp', port: 80.5 }, ['port']],
    ['an unknown field', { from: 'h1', to: 'h2', via: 'dpu-1' }, ['via']],
  ]
  for (const [name, request, paths] of cases) {
    const parsed = v.safeParse(TraceRequest, request)
    const issues = parsed.success ? [] : parsed.issues.map((i) => v.getDotPath(i) ?? '')
    t.same([...new Set(issues)], paths, name)
  }
})

t.test('an address to trace to is kept canonical, any spelling the same', async (t) => {
  const parsed = v.parse(TraceRequest, { from: 'fabric', to: '2001:DB8:FF:0::5' })
  t.equal(parsed.to, '2001:db8:ff::5')
  t.equal(v.parse(TraceRequest, { from: 'h1', to: 'h2' }).to, 'h2', 'a host name as given')
})

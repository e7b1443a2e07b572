import t from 'tap'
import { parseIp } from './address.ts'
import { compile, normalizeNetwork } from './definition.ts'
import { describeUsage, type Held } from './usage.ts'

const held = (owner: string, ip: string): Held => ({ owner, address: parseIp(ip) })

t.test('a /28: one character per address, held over reserved over free', async (t) => {
  const layout = compile(
    'g',
    normalizeNetwork({
      subnets: [
        {
          cidr: '10.0.0.0/28',
          gateway: '10.0.0.1',
          pools: [
            { start: '10.0.0.1', end: '10.0.0.9', name: 'default' },
            { start: '10.0.0.10', end: '10.0.0.13', name: 'vms' },
          ],
          // 10.0.0.3 is held and reserved: Ganeti lets an operator reserve an address in use.
          external: [{ start: '10.0.0.3', end: '10.0.0.5' }],
        },
      ],
    }),
  )
  const usage = describeUsage('g', layout, [held('h2', '10.0.0.11'), held('h1', '10.0.0.3')])
  const [subnet] = usage.subnets
  //          .0 .1 .2 .3 .4 .5 .6 .7 .8 .9 .10 .11 .12 .13 .14 .15
  t.equal(subnet?.map, 'XX.+XX....'.concat('.+..-X'))
  t.equal(subnet?.mapFormat, 'address')
  t.match(subnet, { size: '16', used: 2, reserved: 5, free: 8 })
  t.same(subnet?.pools, [
    { name: 'default', start: '10.0.0.1', end: '10.0.0.9', size: 9, used: 1, free: 5 },
    { name: 'vms', start: '10.0.0.10', end: '10.0.0.13', size: 4, used: 1, free: 3 },
  ])
  t.same(usage.allocations, [
    { owner: 'h1', ip: '10.0.0.3' },
    { owner: 'h2', ip: '10.0.0.11' },
  ])
})

t.test('an IPv6 /64 is drawn as runs, in no time', async (t) => {
  const layout = compile(
    'g',
    normalizeNetwork({
      subnets: [
        {
          cidr: 'fd00:20::/64',
          gateway: 'fd00:20::1',
          pools: [{ start: 'fd00:20::', end: 'fd00:20::ffff', name: 'default' }],
          external: [{ start: 'fd00:20::a', end: 'fd00:20::b' }],
        },
      ],
    }),
  )
  const [subnet] = describeUsage('g', layout, [held('h1', 'fd00:20::2')]).subnets
  t.equal(subnet?.mapFormat, 'runs')
  t.equal(subnet?.map, `X2+1.7X2.${0xffff - 11}-${(1n << 64n) - 0x10000n}`)
  t.match(subnet, { size: (1n << 64n).toString(), used: 1, reserved: 4, free: 0xffff - 11 + 7 })
})

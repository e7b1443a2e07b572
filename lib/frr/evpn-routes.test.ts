import t from 'tap'
import { type5Paths } from './evpn-routes.ts'

// As FRR 8.4 prints `show bgp l2vpn evpn route type prefix json` (trimmed).
const shown = JSON.stringify({
  '100.70.3.11:2': {
    rd: '100.70.3.11:2',
    '[5]:[0]:[32]:[10.20.0.5]': {
      prefix: '[5]:[0]:[32]:[10.20.0.5]',
      paths: [
        [
          {
            extendedCommunity: { string: 'RT:65001:10001 ET:8 Rmac:aa:bb:cc:00:00:01' },
            nexthops: [{ ip: '100.70.3.11', afi: 'ipv4', used: true }],
          },
        ],
      ],
    },
    '[2]:[0]:[48]:[aa:bb:cc:00:00:02]': { paths: [[{ nexthops: [{ ip: '100.70.3.11' }] }]] },
  },
  '100.70.3.12:3': {
    '[5]:[0]:[128]:[fd00:20::5]': {
      paths: [
        [
          {
            extendedCommunity: { string: 'RT:65001:10002 RT:65001:10003 ET:8' },
            nexthops: [{ ip: '100.70.3.12' }],
          },
        ],
      ],
    },
  },
  numPrefix: 3,
  numPaths: 3,
})

t.test(
  'type5Paths reads each type-5 path with its prefix, route targets and next hops',
  async (t) => {
    t.same(type5Paths(shown), [
      { prefix: '10.20.0.5/32', routeTargets: ['65001:10001'], nextHops: ['100.70.3.11'] },
      {
        prefix: 'fd00:20::5/128',
        routeTargets: ['65001:10002', '65001:10003'],
        nextHops: ['100.70.3.12'],
      },
    ])
  },
)

t.test('type5Paths finds nothing in what is not FRR JSON', async (t) => {
  t.same(type5Paths(''), [])
  t.same(type5Paths('% Unknown command'), [])
  t.same(type5Paths('null'), [])
  t.same(type5Paths('{}'), [])
})

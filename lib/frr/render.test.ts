import t from 'tap'
import {
  type Announcement,
  parseBgpSettings,
  parseRunningConfig,
  planChanges,
  renderBgpdConfig,
  routeMapName,
} from './index.ts'

const head = (as: number, routerId: string) => [
  '! bgpd configuration rendered by Hydrazine',
  'frr defaults traditional',
  `router bgp ${as}`,
  ` bgp router-id ${routerId}`,
  ' no bgp network import-check',
]
const tail = [
  ' exit-address-family',
  'exit',
  '!',
  'route-map HZ-IMPORT deny 10',
  'exit',
  '!',
  'route-map HZ-EXPORT permit 10',
  'exit',
]
const peerPolicy = (address: string) => [
  `  neighbor ${address} attribute-unchanged next-hop`,
  `  neighbor ${address} route-map HZ-IMPORT in`,
  `  neighbor ${address} route-map HZ-EXPORT out`,
]
const routeMap = (nextHop: string) => [
  '!',
  `route-map HZ-NH-${nextHop} permit 10`,
  ` set ip next-hop ${nextHop}`,
  'exit',
]

t.test('renderBgpdConfig: the whole bgpd configuration', async (t) => {
  const cases: {
    name: string
    settings: Parameters<typeof parseBgpSettings>[0]
    announcements: Announcement[]
    lines: string[]
  }[] = [
    {
      name: 'no peer, nothing announced',
      settings: { localAs: 65001, routerId: '10.77.0.1', peers: [] },
      announcements: [],
      lines: [...head(65001, '10.77.0.1'), ' !', ' address-family ipv4 unicast', ...tail, '!', ''],
    },
    {
      name: 'two peers, one on its own port and retry interval: base configuration',
      settings: {
        localAs: 4200000001,
        routerId: '172.18.0.2',
        peers: [
          { address: '172.18.0.1', remoteAs: 65000, port: 1790 },
          { address: 'fd00::1', remoteAs: 65002 },
        ],
        connectRetrySeconds: 3,
      },
      announcements: [],
      lines: [
        ...head(4200000001, '172.18.0.2'),
        ' neighbor 172.18.0.1 remote-as 65000',
        ' neighbor 172.18.0.1 port 1790',
        ' neighbor 172.18.0.1 timers connect 3',
        ' neighbor fd00::1 remote-as 65002',
        ' neighbor fd00::1 timers connect 3',
        ' !',
        ' address-family ipv4 unicast',
        ...peerPolicy('172.18.0.1'),
        ...peerPolicy('fd00::1'),
        ...tail,
        '!',
        '',
      ],
    },
    {
      name: 'announcements sorted by prefix, one route-map per next hop',
      settings: {
        localAs: 65001,
        routerId: '10.77.0.1',
        peers: [{ address: '10.77.0.2', remoteAs: 65000 }],
      },
      announcements: [
        { prefix: '203.0.113.9/32', nextHop: '10.77.0.105' },
        { prefix: '198.51.100.1/32', nextHop: '10.77.0.106' },
        { prefix: '203.0.113.8/32', nextHop: '10.77.0.105' },
      ],
      lines: [
        ...head(65001, '10.77.0.1'),
        ' neighbor 10.77.0.2 remote-as 65000',
        ' neighbor 10.77.0.2 timers connect 10',
        ' !',
        ' address-family ipv4 unicast',
        '  network 198.51.100.1/32 route-map HZ-NH-10.77.0.106',
        '  network 203.0.113.8/32 route-map HZ-NH-10.77.0.105',
        '  network 203.0.113.9/32 route-map HZ-NH-10.77.0.105',
        ...peerPolicy('10.77.0.2'),
        ...tail,
        ...routeMap('10.77.0.105'),
        ...routeMap('10.77.0.106'),
        '!',
        '',
      ],
    },
  ]
  for (const c of cases) {
    t.same(
      renderBgpdConfig(parseBgpSettings(c.settings), c.announcements).split('\n'),
      c.lines,
      c.name,
    )
  }
  t.equal(routeMapName('172.18.0.105'), 'HZ-NH-172.18.0.105')
})

t.test('what is rendered reads back as Hydrazine-owned, with nothing left to plan', async (t) => {
  const settings = parseBgpSettings({
    localAs: 65001,
    routerId: '10.77.0.1',
    peers: [{ address: '10.77.0.2', remoteAs: 65000 }],
  })
  const cases: Announcement[][] = [
    [],
    [{ prefix: '203.0.113.7/32', nextHop: '10.77.0.105' }],
    [
      { prefix: '203.0.113.7/32', nextHop: '10.77.0.105' },
      { prefix: '203.0.113.8/32', nextHop: '10.77.0.106' },
      { prefix: '203.0.113.9/32', nextHop: '10.77.0.105' },
    ],
  ]
  for (const announcements of cases) {
    const label = `${announcements.length} announced`
    const state = parseRunningConfig(renderBgpdConfig(settings, announcements))
    const wanted = new Map(announcements.map((a) => [a.prefix, a.nextHop]))
    t.equal(state.localAs, 65001, `${label}: its AS`)
    t.same(new Map(state.owned), wanted, `${label}: every announcement is ours`)
    t.same([...state.foreign], [], `${label}: nothing foreign`)
    t.same(
      [...state.routeMaps].sort(),
      [...new Set(announcements.map((a) => a.nextHop))].sort(),
      `${label}: a route-map per next hop`,
    )
    t.same(planChanges(state, wanted).commands, [], `${label}: nothing to change`)
  }
})

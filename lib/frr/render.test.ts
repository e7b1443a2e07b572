import t from 'tap'
import {
  type Announcement,
  announcementsIn,
  parseBgpSettings,
  parseRunningConfig,
  planChanges,
  renderBgpdConfig,
  routeMapName,
  startupOrder,
} from './index.ts'

const maps = (...nextHops: string[]) => [
  '! bgpd configuration rendered by Hydrazine',
  'frr defaults traditional',
  'route-map HZ-IMPORT deny 10',
  'exit',
  '!',
  'route-map HZ-EXPORT permit 10',
  'exit',
  ...nextHops.flatMap((nextHop) => [
    '!',
    `route-map HZ-NH-${nextHop} permit 10`,
    nextHop.includes(':') ? ` set ipv6 next-hop global ${nextHop}` : ` set ip next-hop ${nextHop}`,
    'exit',
  ]),
  '!',
]
const head = (as: number, routerId: string) => [
  `router bgp ${as}`,
  ` bgp router-id ${routerId}`,
  ' no bgp network import-check',
  ' bgp graceful-restart',
  ' bgp graceful-restart preserve-fw-state',
]
const peerPolicy = (address: string) => [
  `  neighbor ${address} attribute-unchanged next-hop`,
  `  neighbor ${address} route-map HZ-IMPORT in`,
  `  neighbor ${address} route-map HZ-EXPORT out`,
]
/** Both address-family blocks: IPv6 unicast activated on every peer, always. */
const families = (peers: string[], networks: { v4?: string[]; v6?: string[] } = {}) => [
  ' !',
  ' address-family ipv4 unicast',
  ...(networks.v4 ?? []),
  ...peers.flatMap(peerPolicy),
  ' exit-address-family',
  ' !',
  ' address-family ipv6 unicast',
  ...(networks.v6 ?? []),
  ...peers.flatMap((peer) => [`  neighbor ${peer} activate`, ...peerPolicy(peer)]),
  ' exit-address-family',
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
      lines: [...maps(), ...head(65001, '10.77.0.1'), ...families([]), '!', ''],
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
        ...maps(),
        ...head(4200000001, '172.18.0.2'),
        ' neighbor 172.18.0.1 remote-as 65000',
        ' neighbor 172.18.0.1 port 1790',
        ' neighbor 172.18.0.1 timers connect 3',
        ' neighbor fd00::1 remote-as 65002',
        ' neighbor fd00::1 timers connect 3',
        ...families(['172.18.0.1', 'fd00::1']),
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
        ...maps('10.77.0.106', '10.77.0.105'),
        ...head(65001, '10.77.0.1'),
        ' neighbor 10.77.0.2 remote-as 65000',
        ' neighbor 10.77.0.2 timers connect 10',
        ...families(['10.77.0.2'], {
          v4: [
            '  network 198.51.100.1/32 route-map HZ-NH-10.77.0.106',
            '  network 203.0.113.8/32 route-map HZ-NH-10.77.0.105',
            '  network 203.0.113.9/32 route-map HZ-NH-10.77.0.105',
          ],
        }),
        '!',
        '',
      ],
    },
    {
      name: 'IPv4 and IPv6 side by side: each family in its block, its own route-map kind',
      settings: {
        localAs: 65001,
        routerId: '10.77.0.1',
        peers: [{ address: '10.77.0.2', remoteAs: 65000 }],
      },
      announcements: [
        { prefix: '2001:db8:ff::6/128', nextHop: 'fd00:77::106' },
        { prefix: '203.0.113.9/32', nextHop: '10.77.0.105' },
        { prefix: '2001:db8:ff::5/128', nextHop: 'fd00:77::105' },
      ],
      lines: [
        ...maps('fd00:77::105', 'fd00:77::106', '10.77.0.105'),
        ...head(65001, '10.77.0.1'),
        ' neighbor 10.77.0.2 remote-as 65000',
        ' neighbor 10.77.0.2 timers connect 10',
        ...families(['10.77.0.2'], {
          v4: ['  network 203.0.113.9/32 route-map HZ-NH-10.77.0.105'],
          v6: [
            '  network 2001:db8:ff::5/128 route-map HZ-NH-fd00:77::105',
            '  network 2001:db8:ff::6/128 route-map HZ-NH-fd00:77::106',
          ],
        }),
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
  t.equal(routeMapName('fd00:77::105'), 'HZ-NH-fd00:77::105', "FRR 8.4 takes ':' in the name")
})

t.test("a saved bgpd configuration's announcements carry into the next start's", async (t) => {
  const settings = parseBgpSettings({ localAs: 65001, routerId: '10.77.0.1', peers: [] })
  const announcements = [
    { prefix: '198.51.100.1/32', nextHop: '10.77.0.106' },
    { prefix: '203.0.113.7/32', nextHop: '10.77.0.105' },
    { prefix: '2001:db8:ff::5/128', nextHop: 'fd00:77::105' },
  ]
  // As bgpd saves it: its own order, plus operator prefixes that are not carried.
  const saved = startupOrder(renderBgpdConfig(settings, announcements))
    .replace('  network 198.51.100.1/32', '  network 192.0.2.77/32\n  network 198.51.100.1/32')
    .replace(
      '  network 2001:db8:ff::5/128',
      '  network 2001:db8:77::1/128\n  network 2001:db8:ff::5/128',
    )
  t.same(announcementsIn(saved), announcements)
  t.same(announcementsIn(''), [], 'no saved file: nothing carried')
  const next = parseRunningConfig(renderBgpdConfig(settings, announcementsIn(saved)))
  t.same(Object.fromEntries(next.owned), {
    '198.51.100.1/32': '10.77.0.106',
    '203.0.113.7/32': '10.77.0.105',
    '2001:db8:ff::5/128': 'fd00:77::105',
  })
})

t.test('startupOrder: route-maps ahead of router bgp, everything else in place', async (t) => {
  // As bgpd's `write file` writes it (FRR 8.4).
  const saved = [
    'frr version 8.4.4',
    'frr defaults traditional',
    'hostname hydrazine',
    '!',
    'router bgp 65001',
    ' bgp router-id 10.77.0.1',
    ' !',
    ' address-family ipv4 unicast',
    '  network 203.0.113.7/32 route-map HZ-NH-10.77.0.105',
    ' exit-address-family',
    'exit',
    '!',
    'route-map HZ-IMPORT deny 10',
    'exit',
    '!',
    'route-map HZ-NH-10.77.0.105 permit 10',
    ' set ip next-hop 10.77.0.105',
    'exit',
    '!',
    'end',
    '',
  ].join('\n')
  const ordered = startupOrder(saved).split('\n')
  t.same(ordered.slice(0, 9), [
    'frr version 8.4.4',
    'frr defaults traditional',
    'hostname hydrazine',
    '!',
    'route-map HZ-IMPORT deny 10',
    'exit',
    'route-map HZ-NH-10.77.0.105 permit 10',
    ' set ip next-hop 10.77.0.105',
    'exit',
  ])
  t.equal(ordered[9], 'router bgp 65001')
  t.same([...ordered].sort(), saved.split('\n').sort(), 'no line lost or added')
  t.same(parseRunningConfig(startupOrder(saved)), parseRunningConfig(saved), 'same meaning')
  t.equal(startupOrder(startupOrder(saved)), startupOrder(saved), 'idempotent')
  t.equal(startupOrder('hostname x\n'), 'hostname x\n', 'nothing to move')
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
    [
      { prefix: '203.0.113.7/32', nextHop: '10.77.0.105' },
      { prefix: '2001:db8:ff::5/128', nextHop: 'fd00:77::105' },
      { prefix: '2001:db8:ff::6/128', nextHop: 'fd00:77::105' },
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

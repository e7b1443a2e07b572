import t from 'tap'
import { ConfigError } from '../errors.ts'
import {
  applyPlan,
  NoBgpInstanceError,
  parseBgpPrefix,
  parseBgpSettings,
  parseBgpTable,
  parseRunningConfig,
  planChanges,
  planResync,
  routeMapLines,
  toModel,
} from './index.ts'

const settings = parseBgpSettings({
  localAs: 65001,
  routerId: '10.77.0.1',
  peers: [{ address: '10.77.0.2', remoteAs: 65000 }],
})

t.test('BgpSettings: valid input gets defaults, bad input names the field', async (t) => {
  t.equal(settings.listenPort, 179)
  t.equal(settings.connectRetrySeconds, 10)
  const cases = [
    { input: { localAs: 0, routerId: '1.1.1.1', peers: [] }, field: 'localAs' },
    { input: { localAs: 65001, routerId: 'x', peers: [] }, field: 'routerId' },
    {
      input: { localAs: 65001, routerId: '1.1.1.1', peers: [{ address: 'a', remoteAs: 1 }] },
      field: 'peers.0.address',
    },
    {
      input: { localAs: 65001, routerId: '1.1.1.1', peers: [], listenPort: 70000 },
      field: 'listenPort',
    },
  ]
  for (const { input, field } of cases) {
    t.throws(() => parseBgpSettings(input), ConfigError, field)
    try {
      parseBgpSettings(input)
    } catch (error) {
      t.ok(
        error instanceof ConfigError && error.issues.some((i) => i.path === field),
        `names ${field}`,
      )
    }
  }
})

const running = `frr version 8.4.4
router bgp 65001
 bgp router-id 10.77.0.1
 !
 address-family ipv4 unicast
  network 192.0.2.77/32
  network 198.51.100.7/32 route-map HZ-NH-10.77.0.105
  network 198.51.100.8/32 route-map OPERATOR
 exit-address-family
 !
 address-family ipv6 unicast
  network 2001:db8:77::1/128
  network 2001:db8:ff::5/128 route-map HZ-NH-fd00:77::105
 exit-address-family
 !
 address-family ipv4 multicast
  network 198.51.100.50/32 route-map HZ-NH-10.77.0.105
 exit-address-family
exit
!
router bgp 65001 vrf blue
 address-family ipv4 unicast
  network 198.51.100.99/32 route-map HZ-NH-10.77.0.105
 exit-address-family
 address-family ipv6 unicast
  network 2001:db8:ff::99/128 route-map HZ-NH-fd00:77::105
 exit-address-family
exit
!
route-map HZ-NH-10.77.0.105 permit 10
 set ip next-hop 10.77.0.105
exit
!
route-map HZ-NH-10.77.0.106 permit 10
 set ip next-hop 10.77.0.106
exit
!
route-map HZ-NH-fd00:77::105 permit 10
 set ipv6 next-hop global fd00:77::105
exit
`

t.test(
  'parseRunningConfig: only HZ-NH route-maps in the default IPv4 and IPv6 unicast tables are ours',
  async (t) => {
    const state = parseRunningConfig(running)
    t.equal(state.localAs, 65001)
    t.same(
      [...state.owned],
      [
        ['198.51.100.7/32', '10.77.0.105'],
        ['2001:db8:ff::5/128', 'fd00:77::105'],
      ],
    )
    t.same([...state.foreign].sort(), ['192.0.2.77/32', '198.51.100.8/32', '2001:db8:77::1/128'])
    t.same([...state.routeMaps].sort(), ['10.77.0.105', '10.77.0.106', 'fd00:77::105'])
    t.same([...state.uses].sort(), [
      ['10.77.0.105', 1],
      ['fd00:77::105', 1],
    ])
  },
)

/** bgpd 8.4's `show running-config` with one /32 and two /128s (one by hand), verbatim. */
const runningFromBgpd = `frr version 8.4.4
frr defaults traditional
!
hostname vm
! "log file /tmp/hz-test-rJ25hH/frr/bgpd.log debugging" enabled by "--log" startup option
! use "clear log cmdline-targets" to remove this target
!
!
!
bgp no-rib
router bgp 65001
 bgp router-id 10.77.0.1
 no bgp network import-check
 !
 address-family ipv4 unicast
  network 203.0.113.7/32 route-map HZ-NH-10.77.0.105
 exit-address-family
 !
 address-family ipv6 unicast
  network 2001:db8:ff::5/128 route-map HZ-NH-fd00:77::105
  network 2001:db8:ff::77/128
 exit-address-family
!
exit
!
!
!
route-map HZ-NH-fd00:77::105 permit 10
 set ipv6 next-hop global fd00:77::105
exit
!
route-map HZ-NH-10.77.0.105 permit 10
 set ip next-hop 10.77.0.105
exit
!
!
!
`

t.test("parseRunningConfig: bgpd's own text, IPv4 and IPv6", async (t) => {
  const state = parseRunningConfig(runningFromBgpd)
  t.same(Object.fromEntries(state.owned), {
    '203.0.113.7/32': '10.77.0.105',
    '2001:db8:ff::5/128': 'fd00:77::105',
  })
  t.same([...state.foreign], ['2001:db8:ff::77/128'])
  t.same([...state.routeMaps].sort(), ['10.77.0.105', 'fd00:77::105'])
  t.same(planChanges(state, state.owned).commands, [], 'what it shows plans nothing')
})

t.test('parseRunningConfig: IPv4 networks written outside an address-family block', async (t) => {
  const state = parseRunningConfig(
    'router bgp 65001\n network 203.0.113.7/32 route-map HZ-NH-10.77.0.105\n network 192.0.2.1/32\nexit\n',
  )
  t.same([...state.owned], [['203.0.113.7/32', '10.77.0.105']])
  t.same([...state.foreign], ['192.0.2.1/32'])
})

t.test('planChanges', async (t) => {
  const state = parseRunningConfig(running)
  const cases: {
    name: string
    wanted: [string, string | null][]
    commands: string[]
    conflicts?: string[]
    invalid?: string[]
  }[] = [
    {
      name: 'already announced: nothing to do',
      wanted: [['198.51.100.7/32', '10.77.0.105']],
      commands: [],
    },
    {
      name: 'withdrawing what is not there: nothing to do',
      wanted: [['203.0.113.1/32', null]],
      commands: [],
    },
    {
      name: 'operator prefixes are conflicts, never touched',
      wanted: [
        ['192.0.2.77/32', null],
        ['198.51.100.8/32', '10.77.0.105'],
      ],
      commands: [],
      conflicts: ['192.0.2.77/32', '198.51.100.8/32'],
    },
    {
      name: 'announce via a new next hop: route-map first, unused ones removed',
      wanted: [['203.0.113.1/32', '10.77.0.107']],
      commands: [
        'route-map HZ-NH-10.77.0.107 permit 10',
        ' set ip next-hop 10.77.0.107',
        'exit',
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 203.0.113.1/32 route-map HZ-NH-10.77.0.107',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
      ],
    },
    {
      name: 'withdraw and move',
      wanted: [
        ['198.51.100.7/32', '10.77.0.106'],
        ['198.51.100.9/32', null],
      ],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 198.51.100.7/32 route-map HZ-NH-10.77.0.106',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.105',
      ],
    },
    {
      name: 'announce via a next hop that has a route-map: no second route-map',
      wanted: [['203.0.113.2/32', '10.77.0.105']],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 203.0.113.2/32 route-map HZ-NH-10.77.0.105',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
      ],
    },
    {
      name: "withdraw the last prefix via a next hop: its route-map goes after the 'no network'",
      wanted: [['198.51.100.7/32', null]],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  no network 198.51.100.7/32',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.105',
        'no route-map HZ-NH-10.77.0.106',
      ],
    },
    {
      name: 'prefixes in a VRF or the multicast table are not ours: announced in the default table',
      wanted: [
        ['198.51.100.99/32', '10.77.0.105'],
        ['198.51.100.50/32', '10.77.0.105'],
        ['2001:db8:ff::99/128', 'fd00:77::105'],
      ],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 198.51.100.99/32 route-map HZ-NH-10.77.0.105',
        '  network 198.51.100.50/32 route-map HZ-NH-10.77.0.105',
        ' exit-address-family',
        ' address-family ipv6 unicast',
        '  network 2001:db8:ff::99/128 route-map HZ-NH-fd00:77::105',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
      ],
    },
    {
      name: 'a /128 via a new IPv6 next hop: its route-map sets the global next hop',
      wanted: [['2001:db8:ff::6/128', 'fd00:77::106']],
      commands: [
        'route-map HZ-NH-fd00:77::106 permit 10',
        ' set ipv6 next-hop global fd00:77::106',
        'exit',
        'router bgp 65001',
        ' address-family ipv6 unicast',
        '  network 2001:db8:ff::6/128 route-map HZ-NH-fd00:77::106',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
      ],
    },
    {
      name: 'both families in one plan: each in its own block, IPv4 first',
      wanted: [
        ['2001:db8:ff::5/128', null],
        ['203.0.113.1/32', '10.77.0.106'],
        ['2001:db8:ff::6/128', 'fd00:77::105'],
        ['198.51.100.7/32', null],
      ],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 203.0.113.1/32 route-map HZ-NH-10.77.0.106',
        '  no network 198.51.100.7/32',
        ' exit-address-family',
        ' address-family ipv6 unicast',
        '  no network 2001:db8:ff::5/128',
        '  network 2001:db8:ff::6/128 route-map HZ-NH-fd00:77::105',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.105',
      ],
    },
    {
      name: 'withdraw the last /128 via a next hop: its route-map goes too',
      wanted: [['2001:db8:ff::5/128', null]],
      commands: [
        'router bgp 65001',
        ' address-family ipv6 unicast',
        '  no network 2001:db8:ff::5/128',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
        'no route-map HZ-NH-fd00:77::105',
      ],
    },
    {
      name: 'an operator /128 is a conflict',
      wanted: [['2001:db8:77::1/128', 'fd00:77::105']],
      commands: [],
      conflicts: ['2001:db8:77::1/128'],
    },
    {
      name: 'what cannot be announced is invalid, the rest still planned',
      wanted: [
        ['2001:db8:ff::7/128', '10.77.0.105'],
        ['203.0.113.5/32', 'fd00:77::105'],
        ['203.0.113.6/128', '10.77.0.105'],
        ['2001:db8:ff::8/32', 'fd00:77::105'],
        ['2001:DB8:ff::9/128', 'fd00:77::105'],
        ['2001:db8:ff::10/128', 'fd00:77:0::105'],
        ['not-an-ip/32', '10.77.0.105'],
        ['203.0.113.7', '10.77.0.105'],
        ['2001:db8:ff::11/128', null],
        ['203.0.113.2/32', '10.77.0.105'],
      ],
      commands: [
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 203.0.113.2/32 route-map HZ-NH-10.77.0.105',
        ' exit-address-family',
        'exit',
        'no route-map HZ-NH-10.77.0.106',
      ],
      invalid: [
        '2001:db8:ff::7/128',
        '203.0.113.5/32',
        '203.0.113.6/128',
        '2001:db8:ff::8/32',
        '2001:DB8:ff::9/128',
        '2001:db8:ff::10/128',
        'not-an-ip/32',
        '203.0.113.7',
      ],
    },
  ]
  for (const c of cases) {
    const plan = planChanges(state, new Map(c.wanted))
    t.same(plan.commands, c.commands, c.name)
    t.same(plan.conflicts, c.conflicts ?? [], `${c.name}: conflicts`)
    t.same(
      plan.invalid.map((i) => i.prefix),
      c.invalid ?? [],
      `${c.name}: invalid`,
    )
  }
})

t.test(
  'planChanges: a route-map deleted by hand is defined again with the next change',
  async (t) => {
    const state = parseRunningConfig(running)
    const lost = { ...state, routeMaps: new Set<string>() }
    const plan = planChanges(lost, new Map([['203.0.113.3/32', '10.77.0.107']]))
    t.same(plan.routeMaps, {
      added: ['10.77.0.105', 'fd00:77::105', '10.77.0.107'],
      removed: [],
    })
    t.same(plan.commands.slice(0, 9), [
      ...routeMapLines('10.77.0.105'),
      ...routeMapLines('fd00:77::105'),
      ...routeMapLines('10.77.0.107'),
    ])
  },
)

t.test(
  'applyPlan: the model after a plan plans nothing more, in any order of changes',
  async (t) => {
    const cases: [string, [string, string | null][]][] = [
      ['announce via a new next hop', [['203.0.113.1/32', '10.77.0.107']]],
      [
        'move and withdraw',
        [
          ['198.51.100.7/32', '10.77.0.106'],
          ['198.51.100.9/32', null],
        ],
      ],
      ['withdraw the last one', [['198.51.100.7/32', null]]],
      [
        'many via one next hop, then one moved',
        [
          ['203.0.113.1/32', '10.77.0.105'],
          ['203.0.113.2/32', '10.77.0.105'],
          ['198.51.100.7/32', '10.77.0.108'],
        ],
      ],
      [
        'a /128 moved, one added, the /32 withdrawn',
        [
          ['2001:db8:ff::5/128', 'fd00:77::106'],
          ['2001:db8:ff::6/128', 'fd00:77::105'],
          ['198.51.100.7/32', null],
        ],
      ],
    ]
    for (const [name, wanted] of cases) {
      const model = toModel(parseRunningConfig(running))
      const plan = planChanges(model, new Map(wanted))
      applyPlan(model, plan)
      t.same(planChanges(model, new Map(wanted)).commands, [], `${name}: nothing left`)
      // The model agrees with what the running config would say after the plan.
      const expected = new Map(parseRunningConfig(running).owned)
      for (const [prefix, nextHop] of wanted) {
        nextHop === null ? expected.delete(prefix) : expected.set(prefix, nextHop)
      }
      t.same([...model.owned].sort(), [...expected].sort(), `${name}: owned`)
      const uses = new Map<string, number>()
      for (const nh of expected.values()) uses.set(nh, (uses.get(nh) ?? 0) + 1)
      t.same([...model.uses].sort(), [...uses].sort(), `${name}: uses`)
      t.same([...model.routeMaps].sort(), [...uses.keys()].sort(), `${name}: route-maps`)
    }
  },
)

t.test('parseBgpPrefix: the valid, locally originated path only', async (t) => {
  const path = (over: Record<string, unknown>) => ({
    valid: true,
    sourced: true,
    nexthops: [{ ip: '10.77.0.105' }],
    ...over,
  })
  const cases: [string, unknown, string | null][] = [
    ['not in the table', {}, null],
    ['announced', { prefix: '203.0.113.7/32', paths: [path({})] }, '10.77.0.105'],
    ['announced, not yet processed', { paths: [path({ processScheduled: true })] }, '10.77.0.105'],
    [
      'withdrawn, not yet processed (as bgpd shows it)',
      { paths: [path({ removed: true, valid: false, bestpath: { overall: true } })] },
      null,
    ],
    ['removed but still flagged valid', { paths: [path({ removed: true })] }, null],
    ['learned from a peer', { paths: [path({ sourced: undefined })] }, null],
    ['invalid', { paths: [path({ valid: false })] }, null],
    [
      'a learned path beside ours',
      {
        paths: [path({ sourced: undefined, nexthops: [{ ip: '10.77.0.2' }] }), path({})],
      },
      '10.77.0.105',
    ],
  ]
  for (const [name, json, nextHop] of cases)
    t.equal(parseBgpPrefix(JSON.stringify(json)), nextHop, name)
})

/**
 * bgpd 8.4's `show bgp ipv6 unicast 2001:db8:ff::5/128 json` for a /128 whose route-map
 * sets `ipv6 next-hop global fd00:77::105`, announced and then just withdrawn (verbatim
 * but for `aspath` and `lastUpdate`).
 */
const v6Path = {
  origin: 'IGP',
  metric: 0,
  weight: 32768,
  valid: true,
  version: 1,
  sourced: true,
  local: true,
  bestpath: { overall: true, selectionReason: 'First path received' },
  nexthops: [
    {
      ip: 'fd00:77::105',
      hostname: 'vm',
      afi: 'ipv6',
      scope: 'global',
      metric: 0,
      accessible: true,
      used: true,
    },
  ],
  peer: { peerId: '::', routerId: '10.77.0.1' },
}
const v6Withdrawn = {
  ...v6Path,
  removed: true,
  valid: false,
  processScheduled: true,
  nexthops: [
    {
      ip: 'fd00:77::105',
      hostname: 'vm',
      afi: 'ipv6',
      scope: 'global',
      accessible: false,
      used: true,
    },
  ],
}

t.test('parseBgpPrefix: a /128 reads as its global next hop', async (t) => {
  const prefix = '2001:db8:ff::5/128'
  const cases: [string, unknown, string | null][] = [
    ['announced', { prefix, version: 1, paths: [v6Path] }, 'fd00:77::105'],
    ['withdrawn, not yet processed', { prefix, version: 1, paths: [v6Withdrawn] }, null],
    [
      'a link-local next hop listed first (as for a path learned over a shared link)',
      {
        prefix,
        paths: [
          {
            ...v6Path,
            nexthops: [
              { ip: 'fe80::1', afi: 'ipv6', scope: 'link-local', used: true },
              ...v6Path.nexthops,
            ],
          },
        ],
      },
      'fd00:77::105',
    ],
  ]
  for (const [name, json, nextHop] of cases)
    t.equal(parseBgpPrefix(JSON.stringify(json)), nextHop, name)
})

t.test('parseBgpTable: locally originated, valid paths only', async (t) => {
  const json = JSON.stringify({
    routes: {
      '198.51.100.7/32': [{ valid: true, peerId: '(unspec)', nexthops: [{ ip: '10.77.0.105' }] }],
      '10.0.0.0/8': [{ valid: true, peerId: '10.77.0.2', nexthops: [{ ip: '10.77.0.2' }] }],
      '198.51.100.9/32': [{ valid: false, peerId: '(unspec)', nexthops: [{ ip: '10.77.0.105' }] }],
    },
  })
  t.same([...parseBgpTable(json)], [['198.51.100.7/32', '10.77.0.105']])
  t.same([...parseBgpTable('{}')], [])

  // bgpd 8.4's `show bgp ipv6 unicast json`, verbatim: a /128 of Hydrazine's and one an
  // operator configured without a route-map (next hop ::).
  const v6 = `{
 "vrfId": 0,
 "vrfName": "default",
 "tableVersion": 2,
 "routerId": "10.77.0.1",
 "defaultLocPrf": 100,
 "localAS": 65001,
 "routes": { "2001:db8:ff::5/128": [{"valid":true,"bestpath":true,"selectionReason":"First path received","pathFrom":"external","prefix":"2001:db8:ff::5","prefixLen":128,"network":"2001:db8:ff::5/128","version":1,"metric":0,"weight":32768,"peerId":"(unspec)","path":"","origin":"IGP","nexthops":[{"ip":"fd00:77::105","hostname":"vm","afi":"ipv6","scope":"global","used":true}]}]
,"2001:db8:ff::77/128": [{"valid":true,"bestpath":true,"selectionReason":"First path received","pathFrom":"external","prefix":"2001:db8:ff::77","prefixLen":128,"network":"2001:db8:ff::77/128","version":2,"metric":0,"weight":32768,"peerId":"(unspec)","path":"","origin":"IGP","nexthops":[{"ip":"::","hostname":"vm","afi":"ipv6","scope":"global","used":true}]}]
 }  } `
  t.same(Object.fromEntries(parseBgpTable(v6)), {
    '2001:db8:ff::5/128': 'fd00:77::105',
    '2001:db8:ff::77/128': '::',
  })
})

t.test(
  'planChanges without a BGP instance: refused only when there is something to do',
  async (t) => {
    const bare = parseRunningConfig('frr version 8.4.4\n!\n')
    t.equal(bare.localAs, undefined)
    t.throws(
      () => planChanges(bare, new Map([['203.0.113.1/32', '10.77.0.105']])),
      NoBgpInstanceError,
    )
    t.same(
      planChanges(bare, new Map([['203.0.113.1/32', null]])).commands,
      [],
      'nothing to withdraw',
    )
  },
)

t.test('planResync: withdraws what the store lacks, unless the store looks wiped', async (t) => {
  const nh = '10.77.0.105'
  const owned = new Map(
    ['198.51.100.1/32', '198.51.100.2/32', '198.51.100.3/32'].map((p) => [p, nh]),
  )
  const announce = (...ips: string[]) => ips.map((ip) => ({ prefix: `${ip}/32`, nextHop: nh }))
  const cases: {
    name: string
    owned?: Map<string, string>
    desired: { prefix: string; nextHop: string }[]
    max?: number
    wanted: [string, string | null][]
    held: string[]
  }[] = [
    {
      name: 'in sync: the same announcements, nothing stale',
      desired: announce('198.51.100.1', '198.51.100.2', '198.51.100.3'),
      wanted: [
        ['198.51.100.1/32', nh],
        ['198.51.100.2/32', nh],
        ['198.51.100.3/32', nh],
      ],
      held: [],
    },
    {
      name: 'drift: one missing announced, one stale withdrawn',
      desired: announce('198.51.100.1', '198.51.100.2', '203.0.113.7'),
      wanted: [
        ['198.51.100.1/32', nh],
        ['198.51.100.2/32', nh],
        ['203.0.113.7/32', nh],
        ['198.51.100.3/32', null],
      ],
      held: [],
    },
    {
      name: 'an empty store while FRR announces: nothing withdrawn, all held',
      desired: [],
      wanted: [],
      held: ['198.51.100.1/32', '198.51.100.2/32', '198.51.100.3/32'],
    },
    {
      name: 'an empty store and nothing announced: nothing to do',
      owned: new Map(),
      desired: [],
      wanted: [],
      held: [],
    },
    {
      name: 'more stale prefixes than the cap: none withdrawn, missing ones still announced',
      desired: announce('203.0.113.7'),
      max: 2,
      wanted: [['203.0.113.7/32', nh]],
      held: ['198.51.100.1/32', '198.51.100.2/32', '198.51.100.3/32'],
    },
    {
      name: 'exactly the cap: withdrawn',
      desired: announce('198.51.100.1'),
      max: 2,
      wanted: [
        ['198.51.100.1/32', nh],
        ['198.51.100.2/32', null],
        ['198.51.100.3/32', null],
      ],
      held: [],
    },
    {
      name: 'both families: a stale /128 withdrawn beside a wanted /32',
      owned: new Map([
        ['198.51.100.1/32', nh],
        ['2001:db8:ff::5/128', 'fd00:77::105'],
      ]),
      desired: [
        ...announce('198.51.100.1'),
        { prefix: '2001:db8:ff::6/128', nextHop: 'fd00:77::105' },
      ],
      wanted: [
        ['198.51.100.1/32', nh],
        ['2001:db8:ff::6/128', 'fd00:77::105'],
        ['2001:db8:ff::5/128', null],
      ],
      held: [],
    },
    {
      name: 'a moved next hop is an announcement, not a withdrawal',
      desired: [{ prefix: '198.51.100.1/32', nextHop: '10.77.0.106' }],
      max: 0,
      wanted: [['198.51.100.1/32', '10.77.0.106']],
      held: ['198.51.100.2/32', '198.51.100.3/32'],
    },
  ]
  for (const c of cases) {
    const plan = planResync(c.owned ?? owned, c.desired, c.max ?? 16)
    t.same([...plan.wanted], c.wanted, `${c.name}: wanted`)
    t.same(plan.held, c.held, `${c.name}: held`)
  }
})

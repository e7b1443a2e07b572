import t from 'tap'
import { evpnBaseConfig, evpnVrfConfig, evpnVrfRemoval, selfOriginatedType5 } from './evpn.ts'
import { batchesOf, batchFailures, kernelPlan, netnsPlan, routerMacOf } from './vrf.ts'

const argv = (commands: { argv: readonly string[] }[]) => commands.map((c) => c.argv.join(' '))

t.test(
  'the kernel backend: a VRF device with the L3VNI bridge, VXLAN and group interface',
  async (t) => {
    t.same(argv(kernelPlan.ensureVrf({ vni: 10001, vlan: 101, group: 'g', vtep: '192.0.2.1' })), [
      'ip link add hzv10001 type vrf table 1010001',
      'ip link set hzv10001 up',
      'ip link add hzb10001 type bridge stp_state 0',
      'ip link set hzb10001 address 06:72:c0:00:02:01',
      'ip link set hzb10001 alias g',
      'ip link set hzb10001 master hzv10001',
      'ip link set hzb10001 up',
      'ip link add hzx10001 type vxlan id 10001 local 192.0.2.1 dstport 4789 nolearning',
      'ip link set hzx10001 master hzb10001',
      'ip link set hzx10001 up',
      'ip link add vlan101 type bridge stp_state 0',
      'ip link set vlan101 address 02:68:7b:00:27:11',
      'ip link set vlan101 master hzv10001',
      'ip link set vlan101 up',
      'sysctl -qw net.ipv4.conf.vlan101.proxy_arp=1',
      'ip -4 rule add pref 510 iif vlan101 lookup 1010001 suppress_prefixlength 0',
      'ip -4 rule add pref 511 iif vlan101 prohibit',
      'ip -6 rule add pref 510 iif vlan101 lookup 1010001 suppress_prefixlength 0',
      'ip -6 rule add pref 511 iif vlan101 prohibit',
    ])
  },
)

t.test('the kernel backend: a host port on the group interface and off it', async (t) => {
  const port = {
    vni: 10001,
    vlan: 101,
    port: 'pf0vf0',
    gateways: [
      { address: '10.10.0.1', prefixLength: 24 },
      { address: 'fd00:10::1', prefixLength: 64 },
    ],
    addresses: ['10.10.0.5', 'fd00:10::5'],
    mtu: 9000,
  }
  t.same(argv(kernelPlan.attach(port)), [
    'ip link set hzx10001 protodown off',
    'ip link set pf0vf0 master vlan101',
    'ip link set pf0vf0 mtu 9000',
    'ip link set pf0vf0 up',
    'ip addr add 10.10.0.1/32 dev vlan101',
    'ip addr add fd00:10::1/128 dev vlan101',
    `sh -c ip -j route show 10.10.0.5/32 dev vlan101 vrf hzv10001 | grep -q '"metric":4200[,}]' || { while ip route del 10.10.0.5/32 dev vlan101 vrf hzv10001 2>/dev/null; do :; done; ip route add 10.10.0.5/32 dev vlan101 vrf hzv10001 metric 4200; }`,
    'ip route del 10.10.0.5/32 dev vlan101 vrf hzv10001 metric 4201',
    'ip route del 10.10.0.5/32 dev vlan101 vrf hzv10001 metric 4202',
    `sh -c ip -j route show fd00:10::5/128 dev vlan101 vrf hzv10001 | grep -q '"metric":4200[,}]' || { while ip route del fd00:10::5/128 dev vlan101 vrf hzv10001 2>/dev/null; do :; done; ip route add fd00:10::5/128 dev vlan101 vrf hzv10001 metric 4200; }`,
    'ip route del fd00:10::5/128 dev vlan101 vrf hzv10001 metric 4201',
    'ip route del fd00:10::5/128 dev vlan101 vrf hzv10001 metric 4202',
    'ip -4 rule del pref 500 iif vlan101 from 10.10.0.5/32 lookup 1010001',
    'ip -6 rule del pref 500 iif vlan101 from fd00:10::5/128 lookup 1010001',
  ])
  t.same(argv(kernelPlan.detach(port)), [
    'sh -c while ip route del 10.10.0.5/32 vrf hzv10001 2>/dev/null; do :; done',
    'ip -4 rule del pref 500 iif vlan101 from 10.10.0.5/32 lookup 1010001',
    'sh -c while ip route del fd00:10::5/128 vrf hzv10001 2>/dev/null; do :; done',
    'ip -6 rule del pref 500 iif vlan101 from fd00:10::5/128 lookup 1010001',
    'ip link set pf0vf0 nomaster',
  ])
  t.same(argv(kernelPlan.joinRelayLink({ vni: 10001, vlan: 101 })), [
    'ip link set hzd10001 master vlan101',
    'ip link set hzd10001 up',
  ])
  t.same(argv(kernelPlan.removeVrf({ vni: 10001, vlan: 101 })), [
    'ip link del hzx10001',
    'ip link del hzb10001',
    'ip link del vlan101',
    'ip link del hzv10001',
    'ip -4 rule del pref 510 iif vlan101',
    'ip -4 rule del pref 511 iif vlan101',
    'ip -6 rule del pref 510 iif vlan101',
    'ip -6 rule del pref 511 iif vlan101',
  ])
})

t.test('access levels: a leaking host is marked by metric and let out by its source', async (t) => {
  const plan = netnsPlan({ underlay: 'lab-dpu1', dir: '/run/hz/vrfs' })
  const host = {
    vni: 7,
    vlan: 100,
    port: 'h1',
    gateways: [{ address: '10.10.0.1', prefixLength: 24 }],
    addresses: ['10.10.0.5'],
  }
  const n = 'ip -n lab-dpu1-v7'
  const group = argv(plan.ensureVrf({ vni: 7, vlan: 100, group: 'g', vtep: '192.0.2.1' }))
  t.ok(
    group.includes(`${n} -4 rule add pref 510 iif vlan100 lookup main suppress_prefixlength 0`) &&
      group.includes(`${n} -4 rule add pref 511 iif vlan100 prohibit`),
    'every source on vlan100: the VRF without its default route, then refused',
  )
  const cases = [
    {
      access: 'None' as const,
      has: [`${n} route add 10.10.0.5/32 dev vlan100 metric 4200`],
      hasNot: [`${n} -4 rule add pref 500 iif vlan100 from 10.10.0.5/32 lookup main`],
    },
    {
      access: 'FabricAccess' as const,
      has: [
        `${n} route add 10.10.0.5/32 dev vlan100 metric 4201`,
        `${n} route del 10.10.0.5/32 dev vlan100 metric 4200`,
        `${n} -4 rule add pref 500 iif vlan100 from 10.10.0.5/32 lookup main`,
      ],
      hasNot: [],
    },
    {
      access: 'PublicAccess' as const,
      publicIp: '203.0.113.9',
      has: [
        `${n} route add 10.10.0.5/32 dev vlan100 metric 4201`,
        `${n} route add 203.0.113.9/32 dev vlan100 metric 4202`,
        `${n} -4 rule add pref 500 iif vlan100 from 203.0.113.9/32 lookup main`,
      ],
      hasNot: [],
    },
  ]
  for (const c of cases) {
    const lines = argv(plan.attach({ ...host, access: c.access, publicIp: c.publicIp }))
    // A route is added inside a shell command that first keeps one already right.
    const planned = (l: string) => lines.some((line) => line === l || line.includes(`; ${l}; }`))
    for (const l of c.has) t.ok(planned(l), `${c.access}: ${l}`)
    for (const l of c.hasNot) t.notOk(planned(l), `${c.access}: not ${l}`)
  }
  const isolate = argv(
    plan.withdraw({ vni: 7, vlan: 100, addresses: ['10.10.0.5', '203.0.113.9'] }),
  )
  t.ok(
    isolate.includes(`sh -c while ${n} route del 203.0.113.9/32 2>/dev/null; do :; done`),
    'the public /32 goes, whatever its metric',
  )
  t.ok(
    isolate.includes(`${n} -4 rule del pref 500 iif vlan100 from 203.0.113.9/32 lookup main`),
    'and its rule',
  )
})

t.test('the DPU marks leaking routes for the border by metric', async (t) => {
  const base = evpnBaseConfig(65001, '192.0.2.1', [])
  const at = base.indexOf('route-map HZ-HOSTS4 permit 5')
  t.same(base.slice(at, at + 5), [
    'route-map HZ-HOSTS4 permit 5',
    ' match ip address prefix-list HZ-HOSTS4',
    ' match metric 4201',
    ' set large-community 65001:1:1',
    'exit',
  ])
  t.ok(base.includes(' set large-community 65001:1:2'), 'a public IP: ASN:1:2')
  t.ok(base.includes('route-map HZ-HOSTS6 permit 10'), 'any other host route: unmarked')
})

t.test(
  'the netns backend names the VRF namespace after its DPU and binds it as hzv<VNI>',
  async (t) => {
    const plan = netnsPlan({ underlay: 'lab-dpu1', dir: '/run/hz/vrfs' })
    t.equal(plan.nsOf(7), 'lab-dpu1-v7')
    const lines = argv(plan.ensureVrf({ vni: 7, vlan: 100, group: 'g', vtep: '192.0.2.1' }))
    t.ok(lines.includes('ip netns add lab-dpu1-v7'))
    t.ok(lines.some((l) => l.includes('mount --bind /run/netns/lab-dpu1-v7 /run/hz/vrfs/hzv7')))
    t.ok(
      lines.some((l) =>
        l.includes(
          'ip -n lab-dpu1 link add hzx7 type vxlan id 7 local 192.0.2.1 dstport 4789 nolearning',
        ),
      ),
      'the VXLAN device is made in the underlay',
    )
    t.ok(lines.includes('ip -n lab-dpu1-v7 link add vlan100 type bridge stp_state 0'))
    const attach = argv(
      plan.attach({
        vni: 7,
        vlan: 100,
        port: 'h1',
        gateways: [{ address: '10.10.0.1', prefixLength: 24 }],
        addresses: ['10.10.0.5'],
      }),
    )
    t.ok(attach.includes('ip -n lab-dpu1-v7 link set h1 master vlan100'), 'the port joins vlan100')
    t.ok(attach.includes('ip -n lab-dpu1-v7 addr add 10.10.0.1/32 dev vlan100'), 'the gateway')
    t.ok(
      attach.some((l) =>
        l.includes('ip -n lab-dpu1-v7 route add 10.10.0.5/32 dev vlan100 metric 4200'),
      ),
      'the /32',
    )
  },
)

t.test('one FRR configuration for both backends', async (t) => {
  const vrf = evpnVrfConfig({ vni: 7, asn: 65001, routeTarget: '65001:7', vtep: '192.0.2.1' })
  t.same(vrf.slice(0, 4), ['vrf hzv7', ' vni 7', 'exit-vrf', 'router bgp 65001 vrf hzv7'])
  t.ok(vrf.includes('  redistribute kernel route-map HZ-HOSTS4'))
  t.ok(vrf.includes('  advertise ipv4 unicast'))
  t.ok(vrf.includes('  route-target export 65001:7'))
  const base = evpnBaseConfig(65001, '192.0.2.1', ['192.0.2.254'])
  t.ok(base.includes(' neighbor 192.0.2.254 remote-as 65001'), 'iBGP with the reflector')
  t.ok(base.includes('  advertise-all-vni'))
  t.same(
    evpnVrfRemoval(7, 65001),
    ['vrf hzv7', ' no vni 7', 'exit-vrf', 'no router bgp 65001 vrf hzv7'],
    'the L3VNI goes before the instance (bgpd refuses the other order)',
  )
})

t.test(
  "a DPU counts as announced only its own type-5 routes of the VRF's route target",
  async (t) => {
    const path = (rts: string, hop: string) => [
      { extendedCommunity: { string: `${rts} ET:8` }, nexthops: [{ ip: hop }] },
    ]
    const shown = JSON.stringify({
      '192.0.2.1:2': {
        '[5]:[0]:[32]:[10.10.0.11]': { paths: [path('RT:65001:7', '192.0.2.1')] },
        '[5]:[0]:[32]:[10.10.0.12]': { paths: [path('RT:65001:8', '192.0.2.1')] },
      },
      '192.0.2.2:2': {
        // Another DPU's host of the same group, reflected back: not this DPU's.
        '[5]:[0]:[32]:[10.10.0.13]': { paths: [path('RT:65001:7', '192.0.2.2')] },
      },
      numPrefix: 3,
    })
    t.same(selfOriginatedType5(shown, '65001:7', '192.0.2.1'), ['10.10.0.11/32'])
    t.same(selfOriginatedType5(shown, ':7', '192.0.2.1'), ['10.10.0.11/32'], 'any AS')
    t.same(selfOriginatedType5(shown, ':8', '192.0.2.1'), ['10.10.0.12/32'])
    t.same(selfOriginatedType5(shown, '65001:7', '192.0.2.3'), [], 'nothing of another VTEP')
    t.same(selfOriginatedType5('not json', '65001:7', '192.0.2.1'), [])
  },
)

t.test("a plan's neighbouring ip commands with the same options run as one batch", async (t) => {
  const exists = /File exists/
  const plan = [
    { argv: ['ip', 'link', 'set', 'a', 'up'] },
    { argv: ['ip', 'addr', 'add', '10.0.0.1/32', 'dev', 'a'], done: exists },
    { argv: ['sh', '-c', 'true'] },
    { argv: ['ip', '-n', 'ns1', 'link', 'set', 'b', 'up'] },
    { argv: ['ip', '-n', 'ns1', 'route', 'del', 'fd00::5/128', 'dev', 'b'] },
    { argv: ['ip', '-n', 'ns1', '-6', 'rule', 'add', 'pref', '500', 'iif', 'b', 'prohibit'] },
    { argv: ['ip', '-n', 'ns1', '-6', 'rule', 'add', 'pref', '501', 'iif', 'b', 'prohibit'] },
    { argv: ['ip', 'netns', 'add', 'ns2'] },
    { argv: ['ip', 'link', 'set', 'c', 'alias', 'a group'] },
    { argv: ['ip', 'link', 'set', 'c', 'up'] },
    { argv: ['ip', '-j', 'link', 'show'] },
    { argv: ['ip', 'link', 'set', 'd', 'up'] },
  ]
  t.same(
    batchesOf(plan).map((r) => ({ options: r.options, lines: r.lines, n: r.commands.length })),
    [
      { options: [], lines: ['link set a up', 'addr add 10.0.0.1/32 dev a'], n: 2 },
      { options: [], lines: [], n: 1 },
      { options: ['-n', 'ns1'], lines: ['link set b up', 'route del fd00::5/128 dev b'], n: 2 },
      {
        options: ['-n', 'ns1', '-6'],
        lines: ['rule add pref 500 iif b prohibit', 'rule add pref 501 iif b prohibit'],
        n: 2,
      },
      // ip netns runs programs; an argument with a space would read as two; -j reads.
      { options: [], lines: [], n: 1 },
      { options: [], lines: [], n: 1 },
      { options: [], lines: [], n: 1 },
      { options: [], lines: [], n: 1 },
      // A batch of one runs as itself.
      { options: [], lines: [], n: 1 },
    ],
  )
  t.same(
    batchesOf(plan).flatMap((r) => r.commands),
    plan,
    'every command once, in order',
  )
})

t.test('what ip -force -batch says failed, line by line', async (t) => {
  t.same(
    batchFailures(
      'RTNETLINK answers: File exists\nCommand failed -:1\n' +
        'Error: FIB table does not exist.\nCommand failed -:3\n' +
        'Cannot find device "nosuch"\nCommand failed -:4\n',
    ),
    [
      { line: 1, said: 'RTNETLINK answers: File exists' },
      { line: 3, said: 'Error: FIB table does not exist.' },
      { line: 4, said: 'Cannot find device "nosuch"' },
    ],
  )
  t.same(batchFailures(''), [], 'nothing failed')
  t.same(batchFailures('Object "x" is unknown, try "ip help".'), [], 'no line named')
})

t.test("a DPU's router MAC: from its VTEP, one per DPU, the same every time", async (t) => {
  t.equal(routerMacOf('192.0.2.1'), '06:72:c0:00:02:01', 'an IPv4 VTEP is its four bytes')
  t.not(routerMacOf('192.0.2.1'), routerMacOf('192.0.2.2'), 'another VTEP, another MAC')
  t.equal(routerMacOf('2001:DB8:0::1'), routerMacOf('2001:db8::1'), 'an IPv6 VTEP however written')
  t.not(routerMacOf('2001:db8::1'), routerMacOf('2001:db8::2'))
  for (const vtep of ['192.0.2.1', '2001:db8::1']) {
    const first = Number.parseInt(routerMacOf(vtep).slice(0, 2), 16)
    t.equal(first & 0b11, 0b10, `${routerMacOf(vtep)}: locally administered, unicast`)
    t.match(routerMacOf(vtep), /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/)
  }
})

/**
 * `hz ipam` for a person (`ipamText`): a small subnet's map in lines of 64 addresses led
 * by their first, a large one's as runs, reservations only when there are some.
 */
import t from 'tap'
import { COLUMNS, ipamText, summary, table } from './format.ts'

const subnet = (fields: Record<string, unknown>) => ({
  dhcp: false,
  used: 0,
  reserved: 0,
  free: 0,
  pools: [],
  external: [],
  ...fields,
})

t.test('a /25 with a reservation and a holder', async (t) => {
  const map = `XX+${'X'.repeat(3)}${'.'.repeat(121)}X`
  const out = ipamText({
    network: 'g',
    subnets: [
      subnet({
        cidr: '10.0.0.0/25',
        gateway: '10.0.0.1',
        size: '128',
        used: 1,
        reserved: 6,
        free: 121,
        pools: [
          { name: 'default', start: '10.0.0.1', end: '10.0.0.126', size: 126, used: 1, free: 121 },
        ],
        external: [{ start: '10.0.0.3', end: '10.0.0.5' }],
        mapFormat: 'address',
        map,
      }),
    ],
    allocations: [{ owner: 'h1', ip: '10.0.0.2' }],
  })
  t.equal(
    out,
    [
      'network g',
      '',
      'SUBNET       NAME  GATEWAY   DHCP   SIZE  USED  RESERVED  FREE',
      '10.0.0.0/25  -     10.0.0.1  false  128   1     6         121',
      '',
      'SUBNET       POOL     START     END         SIZE  USED  FREE',
      '10.0.0.0/25  default  10.0.0.1  10.0.0.126  126   1     121',
      '',
      'SUBNET       RESERVED FROM  TO',
      '10.0.0.0/25  10.0.0.3       10.0.0.5',
      '',
      'map of 10.0.0.0/25 (+ used, X reserved, . free, - in no pool):',
      `  10.0.0.0   ${map.slice(0, 64)}`,
      `  10.0.0.64  ${map.slice(64)}`,
      '',
      'IP        OWNER',
      '10.0.0.2  h1',
    ].join('\n'),
  )
})

t.test('an IPv6 /64 as runs, nothing held, no reservations', async (t) => {
  const out = ipamText({
    network: 'g',
    subnets: [
      subnet({
        cidr: 'fd00::/64',
        size: '18446744073709551616',
        mapFormat: 'runs',
        map: 'X1.65535-1',
      }),
    ],
    allocations: [],
  })
  t.notMatch(out, /RESERVED FROM/)
  t.match(out, /\nmap of fd00::\/64, as runs of <state><count> \(\+ used.*\):\n {2}X1\.65535-1\n/)
  t.match(out, /\nno address is held$/)
})

t.test("groups' NETWORK column: the IPv4 network, or an IPv6-only group's network6", async (t) => {
  const out = table(
    [
      { name: 'g4', spec: { tenantId: 't', network: { cidr: '10.0.0.0/24' } }, status: {} },
      { name: 'g6', spec: { tenantId: 't', network6: { cidr: 'fd00:6::/64' } }, status: {} },
    ],
    COLUMNS['resource-groups'] ?? [],
  )
  const [, g4, g6] = out.trim().split('\n')
  t.match(g4, /^g4\s+t\s+10\.0\.0\.0\/24\s/)
  t.match(g6, /^g6\s+t\s+fd00:6::\/64\s/)
})

t.test("a DPU's host ports: by network in the list, one by one in its summary", async (t) => {
  const dpu = {
    id: 'dpu1',
    state: 'Online',
    hosts: ['h1'],
    ports: [
      { port: 'pf0hpf', network: 'tenant', group: 'group-a', host: 'h1', phase: 'Ready' },
      {
        port: 'pf1hpf',
        network: 'admin',
        group: 'admin',
        host: 'admin-dpu1-pf1hpf',
        phase: 'Ready',
      },
      { port: 'pf0vf0', network: 'none', reason: 'no MAC' },
    ],
  }
  const [, row] = table([dpu], COLUMNS.dpus ?? [])
    .trim()
    .split('\n')
  t.match(row, /^dpu1\s+Online\s+-?\s*1\s+1 admin, 1 tenant, 1 none\s/)
  const text = summary(dpu)
  t.match(text, /ports:\n\s+PORT\s+NETWORK\s+GROUP\s+HELD BY\s+PHASE\s+WHY\n/)
  t.match(text, /pf1hpf\s+admin\s+admin\s+admin-dpu1-pf1hpf\s+Ready/)
  t.match(text, /pf0vf0\s+none\s.*no MAC/)
})

t.test("groups' CENTRAL column: whether its central runs (centrals on demand)", async (t) => {
  const group = (name: string, conditions: object[]) => ({
    name,
    spec: { tenantId: 't', network: { cidr: '10.0.0.0/24' } },
    status: { phase: 'Ready', managedResourceCount: 0, conditions },
  })
  const out = table(
    [
      group('idle', [{ type: 'CentralRunning', status: 'False', reason: 'NoHosts' }]),
      group('busy', [{ type: 'CentralRunning', status: 'True', reason: 'HasHosts' }]),
      group('always', []),
    ],
    COLUMNS['resource-groups'] ?? [],
  )
  const [header, idle, busy, always] = out.trim().split('\n')
  t.match(header, /HOSTS\s+CENTRAL\s+VERSION/)
  t.match(idle, /\sstopped\s/)
  t.match(busy, /\srunning\s/)
  t.notMatch(always, /running|stopped/)
})

t.test('a public IP held for a pending isolation says for which', async (t) => {
  const held = {
    ip: '203.0.113.5',
    allocated: true,
    heldUntilIsolatedBy: { dpu: 'dpu-1', host: 'h1' },
  }
  const lines = table(
    [held, { ip: '203.0.113.6', allocated: true, allocatedTo: 'h2' }],
    COLUMNS['public-ips'] ?? [],
  )
    .trim()
    .split('\n')
  t.match(lines[0], /^IP\s+ALLOCATED\s+TO\s+HELD FOR$/)
  t.match(lines[1], /^203\.0\.113\.5\s+true\s+-?\s*isolation of h1 on dpu-1$/)
  t.match(lines[2], /^203\.0\.113\.6\s+true\s+h2/)
  t.match(summary(held), /heldFor: isolation of h1 on dpu-1/)
})

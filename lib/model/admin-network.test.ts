import t from 'tap'
import {
  ADMIN_TENANT,
  type AdminNetwork,
  adminGroupSpec,
  adminPortName,
  planAdminPorts,
} from './admin-network.ts'
import type { Dpu, ManagedResource } from './objects.ts'

const admin: AdminNetwork = {
  group: 'admin',
  network: { cidr: '10.99.0.0/24', gateway: '10.99.0.1' },
  dhcpServer: '172.18.0.50',
}
const STAMP = '2026-01-01T00:00:00.000Z'

function dpu(name: string, ports: string[], macs: Record<string, string>): Dpu {
  return {
    name,
    spec: { fabricIps: ['172.18.0.11'], hostPorts: ports, hostMacs: macs },
    specVersion: 3,
    status: { hosts: [] },
    createdAt: STAMP,
    updatedAt: STAMP,
  }
}

function host(
  name: string,
  group: string,
  dpuId: string,
  port: string,
  extra: Partial<ManagedResource> = {},
): ManagedResource {
  return {
    name,
    spec: {
      resourceGroup: group,
      type: 'BareMetal',
      hostMAC: '0a:00:00:00:0a:01',
      hostAccess: 'None',
      dpu: { id: dpuId, ips: ['172.18.0.11'] },
      identifier: port,
    },
    specVersion: 1,
    status: { phase: 'Ready', conditions: [], observedVersion: 1, configsSynced: true },
    createdAt: STAMP,
    updatedAt: STAMP,
    ...extra,
  }
}

const MAC = { pf0hpf: '0a:00:00:00:0a:01' }
const deleting = { deletion: { requestedAt: STAMP, force: false } }

t.test('the admin group is stored under the reserved tenant, relaying to the server', async (t) => {
  t.same(adminGroupSpec(admin), {
    tenantId: ADMIN_TENANT,
    network: admin.network,
    dhcpServer: '172.18.0.50',
  })
})

t.test('admin port names are labels, unique per DPU and port', async (t) => {
  t.equal(adminPortName('admin', 'dpu1', 'pf0hpf'), 'admin-dpu1-pf0hpf')
  const odd = adminPortName('admin', 'dpu1', 'Eth_0.1')
  t.match(odd, /^admin-dpu1-eth-0-1-[0-9a-f]{10}$/, 'odd characters: a hash makes it unique')
  t.not(odd, adminPortName('admin', 'dpu1', 'eth-0-1'))
  const long = adminPortName('admin', 'd'.repeat(63), 'pf0hpf')
  t.ok(long.length <= 63, 'at most 63 characters')
})

t.test('which ports join and leave the admin network', async (t) => {
  const name = 'admin-dpu1-pf0hpf'
  const cases: [string, Dpu[], ManagedResource[], string[], string[], string][] = [
    ['a free port joins', [dpu('dpu1', ['pf0hpf'], MAC)], [], [name], [], 'admin'],
    [
      'a port already on it stays',
      [dpu('dpu1', ['pf0hpf'], MAC)],
      [host(name, 'admin', 'dpu1', 'pf0hpf')],
      [],
      [],
      'admin',
    ],
    [
      'a tenant host placed there: the admin port leaves first',
      [dpu('dpu1', ['pf0hpf'], MAC)],
      [
        host(name, 'admin', 'dpu1', 'pf0hpf'),
        host('h1', 'group-a', 'dpu1', 'pf0hpf', {
          status: { phase: 'Attaching', conditions: [], observedVersion: 0, configsSynced: false },
        }),
      ],
      [],
      [name],
      'tenant',
    ],
    [
      'a tenant host detaching, its isolation not yet confirmed: no admin port yet',
      [dpu('dpu1', ['pf0hpf'], MAC)],
      [host('h1', 'group-a', 'dpu1', 'pf0hpf', deleting)],
      [],
      [],
      'tenant',
    ],
    [
      'an admin port still being isolated is not stored again',
      [dpu('dpu1', ['pf0hpf'], MAC)],
      [host(name, 'admin', 'dpu1', 'pf0hpf', deleting)],
      [],
      [],
      'admin',
    ],
    ['a port without a MAC stays on none', [dpu('dpu1', ['pf0hpf'], {})], [], [], [], 'none'],
    [
      'a port that left the inventory leaves',
      [dpu('dpu1', [], {})],
      [host(name, 'admin', 'dpu1', 'pf0hpf')],
      [],
      [name],
      '',
    ],
  ]
  for (const [title, dpus, hosts, join, leave, network] of cases) {
    const plan = planAdminPorts(admin, dpus, hosts)
    t.same(
      plan.join.map((j) => j.name),
      join,
      `${title}: joins`,
    )
    t.same(plan.leave, leave, `${title}: leaves`)
    t.equal(plan.ports.get('dpu1')?.[0]?.network ?? '', network, `${title}: network`)
  }
})

t.test('a DPU with a tenant host keeps its other ports off the admin network', async (t) => {
  const macs = { pf0hpf: '0a:00:00:00:0a:01', pf1hpf: '0a:00:00:00:0b:01' }
  const plan = planAdminPorts(
    admin,
    [dpu('dpu1', ['pf0hpf', 'pf1hpf'], macs)],
    [host('h1', 'group-a', 'dpu1', 'pf0hpf')],
  )
  t.same(plan.join, [])
  t.match(plan.ports.get('dpu1'), [
    { port: 'pf0hpf', network: 'tenant', group: 'group-a', host: 'h1', phase: 'Ready' },
    { port: 'pf1hpf', network: 'none', reason: /serves group group-a/ },
  ])
})

t.test('a DPU with pending isolations keeps its ports off, naming each host once', async (t) => {
  const plan = planAdminPorts(
    admin,
    [dpu('dpu1', ['pf0hpf'], MAC)],
    [],
    new Map([['dpu1', ['twin', 'h0', 'twin']]]),
  )
  t.same(plan.join, [], 'no admin port joins')
  t.match(plan.ports.get('dpu1'), [
    { port: 'pf0hpf', network: 'none', reason: /has not confirmed h0, twin isolated/ },
  ])
})

t.test('an admin port joins locked to its MAC, placed on the inventory version', async (t) => {
  const plan = planAdminPorts(admin, [dpu('dpu1', ['pf0hpf'], MAC)], [])
  t.same(plan.join, [
    {
      name: 'admin-dpu1-pf0hpf',
      spec: {
        resourceGroup: 'admin',
        type: 'BareMetal',
        hostMAC: '0a:00:00:00:0a:01',
        hostAccess: 'None',
        dpu: { id: 'dpu1', ips: ['172.18.0.11'] },
        identifier: 'pf0hpf',
      },
      dpuVersion: 3,
    },
  ])
})

t.test(
  'a DPU that has not confirmed a force-detached host isolated keeps its ports off',
  async (t) => {
    const dpus = [dpu('dpu1', ['pf0hpf'], MAC)]
    const waiting = planAdminPorts(admin, dpus, [], new Map([['dpu1', ['h1']]]))
    t.same(waiting.join, [], 'no admin port yet')
    t.match(waiting.ports.get('dpu1'), [
      { port: 'pf0hpf', network: 'none', reason: /has not confirmed h1 isolated/ },
    ])
    const name = 'admin-dpu1-pf0hpf'
    const stale = planAdminPorts(
      admin,
      dpus,
      [host(name, 'admin', 'dpu1', 'pf0hpf')],
      new Map([['dpu1', ['h1']]]),
    )
    t.same(stale.leave, [name], 'an admin port already there leaves')
    t.same(
      planAdminPorts(admin, dpus, []).join.map((j) => j.name),
      [name],
      'confirmed: it joins',
    )
  },
)

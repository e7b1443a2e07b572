/** `topologyOf`'s DNS part: the operator's zone, the group's switch, the hosts' names. */
import t from 'tap'
import { compileGroupTopology } from '../../lib/ovn/index.ts'
import type { ManagedResource, ResourceGroup, ResourceGroupSpec } from '../../lib/state/objects.ts'
import type { FabricSettings } from './deps.ts'
import { type GroupState, type MemberState, topologyOf } from './group-state.ts'

const stamp = '2024-01-01T00:00:00.000Z'
const fabric: FabricSettings = { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' }

function group(extra: Partial<ResourceGroupSpec> = {}): ResourceGroup {
  return {
    name: 'group-a',
    spec: {
      tenantId: 'tenant-a',
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
      ...extra,
    },
    specVersion: 1,
    status: {
      phase: 'Ready',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      observedVersion: 1,
      configsSynced: true,
    },
    createdAt: stamp,
    updatedAt: stamp,
  }
}

function member(name: string, ip: string, hostname?: string): MemberState {
  const host: ManagedResource = {
    name,
    spec: {
      resourceGroup: 'group-a',
      type: 'BareMetal',
      hostMAC: `52:54:00:00:00:${ip.split('.')[3]?.padStart(2, '0')}`,
      dpu: { id: 'dpu-1', ips: ['172.18.0.10'] },
      hostAccess: 'None',
      ...(hostname ? { hostname } : {}),
    },
    specVersion: 1,
    status: { phase: 'Ready', conditions: [], observedVersion: 1, configsSynced: true },
    createdAt: stamp,
    updatedAt: stamp,
  }
  return { host, ip }
}

const state = (g = group()): GroupState => ({
  group: g,
  members: [member('host-1', '10.10.10.2', 'web'), member('host-2', '10.10.10.3')],
  relayIps: new Map(),
  staleRelayOwners: [],
})

t.test('topologyOf: DNS in the operator zone, unless the group turns it off', async (t) => {
  const on = topologyOf(state(), fabric, 'hydrazine.internal')
  t.same(on.dns, { zone: 'hydrazine.internal' })
  t.same(
    on.members.map((m) => [m.hostName, m.dnsName]),
    [
      ['host-1', 'web'],
      ['host-2', undefined],
    ],
    "a host's hostname is its DNS name; without one, its own name is",
  )
  const names = compileGroupTopology(on)
    .rows.filter((r) => r.table === 'DNS')
    .flatMap((r) => Object.keys(r.row.records ?? {}))
    .filter((name) => name.endsWith('.internal'))
  t.same(names, ['web.group-a.hydrazine.internal', 'host-2.group-a.hydrazine.internal'])

  const cases: [string, GroupState, string | undefined, object | undefined][] = [
    [
      'dns.enabled: false',
      state(group({ dns: { enabled: false } })),
      'hydrazine.internal',
      undefined,
    ],
    ['no zone (HYDRAZINE_DNS_ZONE=off)', state(), undefined, undefined],
    ['dns: {}', state(group({ dns: {} })), 'example.test', { zone: 'example.test' }],
    ['dns.enabled: true', state(group({ dns: { enabled: true } })), 'x.test', { zone: 'x.test' }],
  ]
  for (const [name, s, zone, dns] of cases) {
    t.same(topologyOf(s, fabric, zone).dns, dns, name)
  }
})

/** `topologyOf`'s DNS part: the operator's zone, the group's switch, the hosts' names. */
import t from 'tap'
import type { ResourceGroupSpec } from '../../lib/model/objects.ts'
import { compileGroupTopology } from '../../lib/ovn/index.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import type { FabricSettings } from './deps.ts'
import { type GroupState, type MemberState, topologyOf } from './group-state.ts'

const fabric: FabricSettings = { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' }

const group = (extra: Partial<ResourceGroupSpec> = {}) => storedGroup('group-a', extra)

function member(name: string, ip: string, hostname?: string): MemberState {
  const mac = `52:54:00:00:00:${ip.split('.')[3]?.padStart(2, '0')}`
  return { host: storedHost(name, { hostMAC: mac, ...(hostname ? { hostname } : {}) }), ip }
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

/**
 * The model as gRPC messages: each address a host's status reports, the DPU's IPv6 NAT
 * address (on the DPU and on the hosts' stored specs), and a host's interfaces and the
 * host an interface's own ManagedResource belongs to, under their proto names; what the
 * model leaves out stays unset; a public IP held for a pending isolation names its DPU and host.
 */
import t from 'tap'
import type { DpuView } from '../../app/index.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { dpuMessage, managedResourceMessage, publicIpMessage } from './objects.ts'

const AT = '2026-01-02T03:04:05.000Z'

function host(
  hostAccessIPs: NonNullable<ManagedResource['status']['hostAccessIPs']>,
  natIp6?: string,
): ManagedResource {
  return {
    name: 'host-1',
    spec: {
      resourceGroup: 'group-a',
      type: 'BareMetal',
      hostMAC: '52:54:00:12:34:56',
      dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'], ...(natIp6 ? { natIp6 } : {}) },
      hostAccess: 'PublicAccess',
    },
    specVersion: 1,
    status: {
      phase: 'Ready',
      conditions: [],
      hostAccessIPs,
      observedVersion: 1,
      configsSynced: true,
    },
    createdAt: AT,
    updatedAt: AT,
  }
}

t.test("each of a host's addresses under its proto name, alone", async (t) => {
  const cases: [keyof NonNullable<ManagedResource['status']['hostAccessIPs']>, string, string][] = [
    ['hostIP', 'hostIp', '10.0.0.5'],
    ['hostIPv6', 'hostIpv6', 'fd00:10::800:ff:fe00:d11'],
    ['fabricIP', 'fabricIp', '172.18.0.111'],
    ['fabricIPv6', 'fabricIpv6', 'fd00:fab::105'],
    ['publicIP', 'publicIp', '203.0.113.7'],
    ['publicIPv6', 'publicIpv6', '2001:db8:ff::10'],
  ]
  for (const [field, proto, ip] of cases) {
    t.same(
      managedResourceMessage(host({ [field]: ip })).status?.hostAccessIps,
      { [proto]: ip },
      `${field} → ${proto}`,
    )
  }
})

t.test("a host's stored spec carries its DPU's IPv6 NAT address when it has one", async (t) => {
  t.same(managedResourceMessage(host({}, 'fd00:fab::105')).spec?.dpu, {
    id: 'dpu-1',
    ips: ['172.18.0.11', '172.18.0.111'],
    natIp6: 'fd00:fab::105',
  })
  t.same(managedResourceMessage(host({})).spec?.dpu, {
    id: 'dpu-1',
    ips: ['172.18.0.11', '172.18.0.111'],
  })
})

t.test("a host's interfaces, each under the proto names of the host's own port", async (t) => {
  const stored = host({})
  const spec = managedResourceMessage({
    ...stored,
    spec: {
      ...stored.spec,
      interfaces: [
        {
          name: 'eth1',
          resourceGroup: 'group-b',
          type: 'BareMetal',
          hostMAC: '52:54:00:12:34:57',
          hostIP: '10.20.20.5',
          dpu: { id: 'dpu-2' },
          hostAccess: 'None',
          identifier: 'pf1hpf',
          hostname: 'm1-storage',
          pool: 'storage',
        },
      ],
    },
  }).spec
  t.same(spec?.interfaces, [
    {
      name: 'eth1',
      resourceGroup: 'group-b',
      type: 'RESOURCE_TYPE_BARE_METAL',
      hostMac: '52:54:00:12:34:57',
      hostIp: '10.20.20.5',
      dpu: { id: 'dpu-2', ips: [] },
      hostAccess: 'HOST_ACCESS_NONE',
      identifier: 'pf1hpf',
      hostname: 'm1-storage',
      pool: 'storage',
    },
  ])
  t.notOk('interfaceOf' in (spec ?? {}), 'a host is no interface')
  t.same(managedResourceMessage(stored).spec?.interfaces, [], 'none: an empty list')
})

t.test("an interface's own ManagedResource names its host", async (t) => {
  const stored = host({})
  const own = { ...stored, name: 'm1-eth1', spec: { ...stored.spec, interfaceOf: 'm1' } }
  t.equal(managedResourceMessage(own).spec?.interfaceOf, 'm1')
})

t.test("a DPU's spec carries its IPv6 NAT address when it has one", async (t) => {
  const dpu = (natIp6?: string): DpuView => ({
    id: 'dpu-1',
    spec: {
      tenantId: 'tenant-a',
      fabricIps: ['172.18.0.11', '172.18.0.111'],
      ...(natIp6 ? { natIp6 } : {}),
      hostPorts: ['pf0hpf'],
    },
    specVersion: 1,
    state: 'Unknown',
    hosts: [],
  })
  t.same(dpuMessage(dpu('fd00:fab::105')).spec, {
    tenantId: 'tenant-a',
    fabricIps: ['172.18.0.11', '172.18.0.111'],
    natIp6: 'fd00:fab::105',
    hostPorts: ['pf0hpf'],
    hostMacs: {},
  })
  t.notOk('natIp6' in (dpuMessage(dpu()).spec ?? {}), 'unset without one')
})

t.test("a DPU's host ports and their networks, as proto enum values", async (t) => {
  const view: DpuView = {
    id: 'dpu-1',
    spec: { fabricIps: ['172.18.0.11'], hostPorts: ['pf0hpf', 'pf1hpf'] },
    specVersion: 1,
    state: 'Online',
    hosts: ['h1'],
    ports: [
      { port: 'pf0hpf', network: 'tenant', group: 'group-a', host: 'h1', phase: 'Ready' },
      { port: 'pf1hpf', network: 'none', reason: 'no MAC' },
    ],
  }
  t.same(dpuMessage(view).ports, [
    {
      port: 'pf0hpf',
      network: 'DPU_PORT_NETWORK_TENANT',
      group: 'group-a',
      host: 'h1',
      phase: 'Ready',
    },
    { port: 'pf1hpf', network: 'DPU_PORT_NETWORK_NONE', reason: 'no MAC' },
  ])
  const { ports: _ports, ...outside } = view
  t.same(dpuMessage(outside).ports, [], 'a DPU not in the inventory: an empty list')
})

t.test('a public IP held for a pending isolation: its DPU and host, no allocatedTo', async (t) => {
  const hold = { dpu: 'dpu-1', host: 'h1' }
  t.strictSame(publicIpMessage({ ip: '203.0.113.5', allocated: true, heldUntilIsolatedBy: hold }), {
    ip: '203.0.113.5',
    allocated: true,
    heldUntilIsolatedBy: hold,
  })
  t.strictSame(publicIpMessage({ ip: '203.0.113.6', allocated: true, allocatedTo: 'h2' }), {
    ip: '203.0.113.6',
    allocated: true,
    allocatedTo: 'h2',
  })
})

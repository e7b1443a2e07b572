/**
 * Specs arriving over gRPC as the input the client validates: the DPU's `nat_ip6` passes
 * through as `natIp6` (left out when unset), and so does a host spec's `dpu.nat_ip6` (the
 * request checks it against the inventory), so that a stored spec read back applies again.
 * A host's interfaces pass through field by field as its own port does; `interface_of`,
 * output only, does not.
 */
import t from 'tap'
import * as v from 'valibot'
import { ManagedResourceRequest } from '../../lib/model/objects.ts'
import type { DpuSpec__Output } from '../../proto/gen/hydrazine/v1/DpuSpec.ts'
import type { ManagedResourceSpec__Output } from '../../proto/gen/hydrazine/v1/ManagedResourceSpec.ts'
import { requestFieldPath } from './fields.ts'
import { dpuSpecInput, hostSpecInput } from './specs.ts'

t.test('a DpuSpec message: nat_ip6 as natIp6 when set', async (t) => {
  const spec: DpuSpec__Output = { fabricIps: ['172.18.0.11'], hostPorts: [], hostMacs: {} }
  t.same(dpuSpecInput({ ...spec, natIp6: 'FD00:FAB::105' }), {
    fabricIps: ['172.18.0.11'],
    natIp6: 'FD00:FAB::105',
    hostPorts: [],
  })
  t.notOk('natIp6' in dpuSpecInput(spec), 'left out when unset')
  t.notOk('hostMacs' in dpuSpecInput(spec), 'no host MACs: left out')
  t.same(
    dpuSpecInput({ ...spec, hostPorts: ['pf0hpf'], hostMacs: { pf0hpf: '0a:00:00:00:0a:01' } }),
    {
      fabricIps: ['172.18.0.11'],
      hostPorts: ['pf0hpf'],
      hostMacs: { pf0hpf: '0a:00:00:00:0a:01' },
    },
  )
})

t.test('a ManagedResourceSpec message: dpu.nat_ip6 passes through', async (t) => {
  const spec: ManagedResourceSpec__Output = {
    resourceGroup: 'group-a',
    type: 'RESOURCE_TYPE_UNSPECIFIED',
    hostMac: '52:54:00:12:34:56',
    dpu: { id: 'dpu-1', ips: ['172.18.0.11'], natIp6: 'fd00:fab::105' },
    hostAccess: 'HOST_ACCESS_UNSPECIFIED',
    interfaces: [],
  }
  t.same(hostSpecInput(spec).dpu, { id: 'dpu-1', ips: ['172.18.0.11'], natIp6: 'fd00:fab::105' })
})

/** A host message with one interface on another group, behind another DPU. */
const withInterface: ManagedResourceSpec__Output = {
  resourceGroup: 'group-a',
  type: 'RESOURCE_TYPE_BARE_METAL',
  hostMac: '52:54:00:12:34:56',
  dpu: { id: 'dpu-1', ips: [] },
  hostAccess: 'HOST_ACCESS_FABRIC_ACCESS',
  interfaces: [
    {
      name: 'eth1',
      resourceGroup: 'group-b',
      type: 'RESOURCE_TYPE_UNSPECIFIED',
      hostMac: '52:54:00:12:34:57',
      hostIp: '10.20.20.5',
      dpu: { id: 'dpu-2', ips: ['172.18.0.12'], natIp6: 'fd00:fab::106' },
      hostAccess: 'HOST_ACCESS_UNSPECIFIED',
      identifier: 'pf1hpf',
      hostname: 'm1-storage',
    },
  ],
}

t.test("a ManagedResourceSpec message's interfaces, each mapped as the host's port", async (t) => {
  t.same(hostSpecInput(withInterface), {
    resourceGroup: 'group-a',
    type: 'BareMetal',
    hostMAC: '52:54:00:12:34:56',
    dpu: { id: 'dpu-1' },
    hostAccess: 'FabricAccess',
    interfaces: [
      {
        name: 'eth1',
        resourceGroup: 'group-b',
        hostMAC: '52:54:00:12:34:57',
        hostIP: '10.20.20.5',
        dpu: { id: 'dpu-2', ips: ['172.18.0.12'], natIp6: 'fd00:fab::106' },
        identifier: 'pf1hpf',
        hostname: 'm1-storage',
      },
    ],
  })
  t.ok(v.is(ManagedResourceRequest, hostSpecInput(withInterface)), 'a valid host request')
  t.notOk('interfaces' in hostSpecInput({ ...withInterface, interfaces: [] }), 'none: left out')
})

t.test("an interface's refusal names the request's proto field", async (t) => {
  const [eth1] = withInterface.interfaces
  const refused = (hostMac: string) => {
    const input = hostSpecInput({
      ...withInterface,
      interfaces: eth1 ? [{ ...eth1, hostMac }] : [],
    })
    const issues = v.safeParse(ManagedResourceRequest, input).issues ?? []
    return issues.map((i) => requestFieldPath(v.getDotPath(i) ?? '', 'spec'))
  }
  t.same(refused('not-a-mac'), ['spec.interfaces[0].host_mac'], 'a bad MAC')
  t.same(refused('52:54:00:12:34:56'), ['spec.interfaces'], "the host's own MAC")
})

t.test('interface_of is output only: a request carrying it applies as without', async (t) => {
  t.same(hostSpecInput({ ...withInterface, interfaceOf: 'm0' }), hostSpecInput(withInterface))
})

/**
 * Specs arriving over gRPC as the input the client validates: the DPU's `nat_ip6` passes
 * through as `natIp6` (left out when unset), and so does a host spec's `dpu.nat_ip6` (the
 * request checks it against the inventory), so that a stored spec read back applies again.
 */
import t from 'tap'
import type { DpuSpec__Output } from '../../proto/gen/hydrazine/v1/DpuSpec.ts'
import type { ManagedResourceSpec__Output } from '../../proto/gen/hydrazine/v1/ManagedResourceSpec.ts'
import { dpuSpecInput, hostSpecInput } from './specs.ts'

t.test('a DpuSpec message: nat_ip6 as natIp6 when set', async (t) => {
  const spec: DpuSpec__Output = { fabricIps: ['172.18.0.11'], hostPorts: [] }
  t.same(dpuSpecInput({ ...spec, natIp6: 'FD00:FAB::105' }), {
    fabricIps: ['172.18.0.11'],
    natIp6: 'FD00:FAB::105',
    hostPorts: [],
  })
  t.notOk('natIp6' in dpuSpecInput(spec), 'left out when unset')
})

t.test('a ManagedResourceSpec message: dpu.nat_ip6 passes through', async (t) => {
  const spec: ManagedResourceSpec__Output = {
    resourceGroup: 'group-a',
    type: 'RESOURCE_TYPE_UNSPECIFIED',
    hostMac: '52:54:00:12:34:56',
    dpu: { id: 'dpu-1', ips: ['172.18.0.11'], natIp6: 'fd00:fab::105' },
    hostAccess: 'HOST_ACCESS_UNSPECIFIED',
  }
  t.same(hostSpecInput(spec).dpu, { id: 'dpu-1', ips: ['172.18.0.11'], natIp6: 'fd00:fab::105' })
})

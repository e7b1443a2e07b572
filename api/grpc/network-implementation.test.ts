/**
 * A group's network implementation over gRPC: the enum both ways (unspecified: left out,
 * for the operator's default to apply), a group stored without it read as Overlay, and a
 * Fabric group's identifiers under `status.fabric`.
 */
import t from 'tap'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import type { ResourceGroupSpec__Output } from '../../proto/gen/hydrazine/v1/ResourceGroupSpec.ts'
import { resourceGroupMessage } from './objects.ts'
import { groupSpecInput } from './specs.ts'

const AT = '2026-01-02T03:04:05.000Z'

function group(spec: ResourceGroup['spec'], fabric?: { vni: number; vlan: number }): ResourceGroup {
  return {
    name: 'group-a',
    spec,
    specVersion: 1,
    status: {
      phase: 'Failed',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      ...(fabric ? { fabric } : {}),
      observedVersion: 1,
      configsSynced: false,
    },
    createdAt: AT,
    updatedAt: AT,
  }
}

const base = { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } }

t.test('the message: the stored type (Overlay when absent) and status.fabric', async (t) => {
  const fabric = resourceGroupMessage(
    group({ ...base, networkImplementationType: 'Fabric' }, { vni: 10000, vlan: 100 }),
  )
  t.equal(fabric.spec?.networkImplementationType, 'NETWORK_IMPLEMENTATION_TYPE_FABRIC')
  t.same(fabric.status?.fabric, { vni: 10000, vlan: 100 })
  const legacy = resourceGroupMessage(group(base))
  t.equal(legacy.spec?.networkImplementationType, 'NETWORK_IMPLEMENTATION_TYPE_OVERLAY')
  t.equal(legacy.status?.fabric, undefined, 'an Overlay group has none')
})

t.test('the request: the enum as the model value, unspecified left out', async (t) => {
  const message = (type: string) =>
    ({
      tenantId: 'tenant-a',
      network: null,
      extraSubnets: [],
      policies: [],
      pools: [],
      reservations: [],
      dns: null,
      network6: null,
      networkImplementationType: type,
    }) as unknown as ResourceGroupSpec__Output
  t.match(groupSpecInput(message('NETWORK_IMPLEMENTATION_TYPE_FABRIC')), {
    networkImplementationType: 'Fabric',
  })
  t.match(groupSpecInput(message('NETWORK_IMPLEMENTATION_TYPE_OVERLAY')), {
    networkImplementationType: 'Overlay',
  })
  t.notOk(
    'networkImplementationType' in
      groupSpecInput(message('NETWORK_IMPLEMENTATION_TYPE_UNSPECIFIED')),
    'unspecified: left out',
  )
  t.match(
    groupSpecInput(message('NETWORK_IMPLEMENTATION_TYPE_RING')),
    {
      networkImplementationType: 'NETWORK_IMPLEMENTATION_TYPE_RING',
    },
    'an unknown value is kept, for the schema to refuse naming the field',
  )
})

/**
 * Stored objects as the store hands them out, for the unit tests of what reads them: a
 * resource group and a managed resource with every field a fresh Ready object has, and
 * the spec and status fields a test names.
 *
 * @example storedGroup('group-a', { network6: { cidr: 'fd00::/64', gateway: 'fd00::1' } })
 */
import type {
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
} from '../../lib/model/objects.ts'

const STAMP = '2024-01-01T00:00:00.000Z'

/** Group `name` of tenant-a on 10.10.10.0/24, Ready at spec version 1. */
export function storedGroup(
  name = 'group-a',
  spec: Partial<ResourceGroupSpec> = {},
  status: Partial<ResourceGroupStatus> = {},
): ResourceGroup {
  return {
    name,
    spec: {
      tenantId: 'tenant-a',
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
      ...spec,
    },
    specVersion: 1,
    status: {
      phase: 'Ready',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      observedVersion: 1,
      configsSynced: true,
      ...status,
    },
    createdAt: STAMP,
    updatedAt: STAMP,
  }
}

/** Host `name` of group-a behind dpu-1, access None, Ready at spec version 1. */
export function storedHost(
  name: string,
  spec: Partial<ManagedResourceSpec> = {},
  status: Partial<ManagedResourceStatus> = {},
): ManagedResource {
  return {
    name,
    spec: {
      resourceGroup: 'group-a',
      type: 'BareMetal',
      hostMAC: '52:54:00:00:00:01',
      dpu: { id: 'dpu-1', ips: ['172.18.0.10'] },
      hostAccess: 'None',
      ...spec,
    },
    specVersion: 1,
    status: { phase: 'Ready', conditions: [], observedVersion: 1, configsSynced: true, ...status },
    createdAt: STAMP,
    updatedAt: STAMP,
  }
}

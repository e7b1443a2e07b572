/**
 * Request bodies as operators and tenants send them: a group on a CIDR, a host on a DPU
 * with the DPU's fabric IPs, the same in every test that needs one.
 */

export const groupSpec = (
  tenantId = 'tenant-a',
  cidr = '10.10.10.0/24',
  gateway = '10.10.10.1',
) => ({
  tenantId,
  network: { cidr, gateway },
})

/**
 * A host request as an operator makes it: the DPU's fabric IPs given in the request, so
 * that the inventory learns the DPU (`dpu-N`: encap 172.18.0.(10+N), NAT 172.18.0.(110+N)).
 */
export const hostSpec = (
  group: string,
  dpu: string,
  n: number,
  extra: Record<string, unknown> = {},
) => ({
  resourceGroup: group,
  hostMAC: `52:54:00:00:${dpu.length.toString(16).padStart(2, '0')}:${n.toString(16).padStart(2, '0')}`,
  dpu: { id: dpu, ips: dpuFabricIps(dpu) },
  ...extra,
})

/** The fabric IPs `[encap, NAT]` the tests give DPU `dpu-N`. */
export function dpuFabricIps(dpu: string): [string, string] {
  const n = Number(
    /(\d+)$/.exec(dpu)?.[1] ?? [...dpu].reduce((a, c) => a + c.charCodeAt(0), 0) % 80,
  )
  return [`172.18.0.${10 + n}`, `172.18.0.${110 + n}`]
}

/**
 * Where a host goes, decided from the operator's inventory: which DPU port it binds and
 * which fabric IPs (encap, NAT) serve it. Tenants name only an assigned DPU and one of its
 * host ports; the physical facts are the inventory's. Pure: the caller reads the group and
 * the DPU, this decides, the store writes.
 */
import type {
  Dpu,
  DpuSpec,
  ManagedResourceRequest,
  ManagedResourceSpec,
  ResourceGroup,
} from './objects.ts'
import { admittedNatIpMessage, natIpsAdmitted } from './southbound-admission.ts'

/** Who asks: an operator (or a trusted queue producer) or one tenant. */
export type Caller =
  | { readonly kind: 'operator' }
  | { readonly kind: 'tenant'; readonly tenant: string }

export interface PlacementIssue {
  readonly path: string
  readonly message: string
}

/** The operator's rules a DPU the request teaches the inventory must follow. */
export interface PlacementRules {
  /** The CIDRs groups' Southbounds admit by address: no NAT address may be inside. */
  readonly southboundCidrs?: readonly string[]
}

export type Placement =
  | {
      readonly ok: true
      /** The host's spec with its DPU's fabric IPs and host port filled in. */
      readonly spec: ManagedResourceSpec
      /** An operator's request taught the inventory something: write this first. */
      readonly dpuChange?: DpuSpec
    }
  | { readonly ok: false; readonly issues: readonly PlacementIssue[] }

/**
 * Places a host request on its DPU.
 *
 * - A tenant may not give `dpu.ips`; the DPU must be assigned to its tenant; the
 *   `identifier` must be one of the DPU's host ports (it may be left out when the DPU has
 *   exactly one).
 * - An operator may give everything in one request: a DPU missing from the inventory is
 *   added (assigned to the group's tenant) from `dpu.ips`, and a new `identifier` joins
 *   its host ports; fabric IPs that disagree with the inventory are refused, as is a DPU
 *   assigned to another tenant than the group's.
 * - FabricAccess and PublicAccess need the DPU's NAT IP. The DPU's IPv6 NAT address comes
 *   from the inventory too; an operator's `dpu.natIp6` must agree with it.
 *
 * @example
 * const placed = placeHost(request, group, await store.getDpu(request.dpu.id), caller)
 * if (!placed.ok) throw new ValidationError(placed.issues)
 */
export function placeHost(
  request: ManagedResourceRequest,
  group: ResourceGroup,
  dpu: Dpu | undefined,
  caller: Caller,
  rules: PlacementRules = {},
): Placement {
  const issues: PlacementIssue[] = []
  const id = request.dpu.id
  const tenant = group.spec.tenantId
  let inventory: DpuSpec | undefined = dpu?.spec
  let dpuChange: DpuSpec | undefined

  if (caller.kind === 'tenant') {
    for (const field of ['ips', 'natIp6'] as const) {
      if (request.dpu[field] === undefined) continue
      issues.push({
        path: `dpu.${field}`,
        message: "fabric IPs come from the operator's inventory; a tenant may not give them",
      })
    }
    if (!inventory || inventory.tenantId !== caller.tenant) {
      return {
        ok: false,
        issues: [
          ...issues,
          { path: 'dpu.id', message: `no DPU ${id} is assigned to tenant ${caller.tenant}` },
        ],
      }
    }
  } else if (!inventory) {
    if (!request.dpu.ips) {
      return {
        ok: false,
        issues: [
          {
            path: 'dpu.id',
            message: `DPU ${id} is not in the inventory: add it (PUT /v1/dpus/${id}) or give dpu.ips`,
          },
        ],
      }
    }
    inventory = {
      tenantId: tenant,
      fabricIps: request.dpu.ips,
      ...(request.dpu.natIp6 ? { natIp6: request.dpu.natIp6 } : {}),
      hostPorts: request.identifier ? [request.identifier] : [],
    }
    dpuChange = inventory
    for (const admitted of natIpsAdmitted(inventory, rules.southboundCidrs ?? [])) {
      const path = admitted.field === 'natIp6' ? 'dpu.natIp6' : 'dpu.ips[1]'
      issues.push({ path, message: admittedNatIpMessage(admitted) })
    }
  } else {
    if (inventory.tenantId !== undefined && inventory.tenantId !== tenant) {
      issues.push({
        path: 'dpu.id',
        message: `DPU ${id} is assigned to tenant ${inventory.tenantId}, not to ${tenant}`,
      })
    }
    if (
      request.dpu.ips !== undefined &&
      JSON.stringify(request.dpu.ips) !== JSON.stringify(inventory.fabricIps)
    ) {
      issues.push({
        path: 'dpu.ips',
        message: `DPU ${id}'s fabric IPs in the inventory are ${inventory.fabricIps.join(', ')}`,
      })
    }
    if (request.dpu.natIp6 !== undefined && request.dpu.natIp6 !== inventory.natIp6) {
      issues.push({
        path: 'dpu.natIp6',
        message: `DPU ${id}'s IPv6 NAT address in the inventory is ${inventory.natIp6 ?? 'unset'}`,
      })
    }
    if (request.identifier && !inventory.hostPorts.includes(request.identifier)) {
      inventory = { ...inventory, hostPorts: [...inventory.hostPorts, request.identifier] }
      dpuChange = inventory
    }
  }

  const ports = inventory.hostPorts
  let identifier = request.identifier
  if (identifier !== undefined && !ports.includes(identifier)) {
    issues.push({
      path: 'identifier',
      message: `must be one of DPU ${id}'s host ports: ${ports.join(', ') || '(none)'}`,
    })
  } else if (identifier === undefined) {
    if (ports.length === 1) identifier = ports[0]
    else if (ports.length > 1) {
      issues.push({
        path: 'identifier',
        message: `is required: DPU ${id} has several host ports (${ports.join(', ')})`,
      })
    } else if (caller.kind === 'tenant') {
      issues.push({ path: 'identifier', message: `DPU ${id} has no host ports in the inventory` })
    }
  }
  // An IPv6-only group's hosts leave through the DPU's IPv6 NAT address, others its NAT IP.
  const ipv6Only = group.spec.network === undefined
  if (request.hostAccess !== 'None' && !(ipv6Only ? inventory.natIp6 : inventory.fabricIps[1])) {
    issues.push({
      path: 'hostAccess',
      message: `${request.hostAccess} needs a${ipv6Only ? 'n IPv6 NAT address (natIp6)' : ' NAT IP'}, and DPU ${id} has none in the inventory`,
    })
  }
  if (issues.length > 0) return { ok: false, issues }

  const { dpu: _dpu, identifier: _identifier, ...rest } = request
  const spec: ManagedResourceSpec = {
    ...rest,
    dpu: {
      id,
      ips: inventory.fabricIps,
      ...(inventory.natIp6 ? { natIp6: inventory.natIp6 } : {}),
    },
    ...(identifier ? { identifier } : {}),
  }
  return { ok: true, spec, ...(dpuChange ? { dpuChange } : {}) }
}

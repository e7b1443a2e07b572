/**
 * Hydrazine's public objects (DESIGN.md "Objects"): what a client asks for (spec) and what
 * Hydrazine reports back (status). The valibot schemas here validate every spec that
 * enters the system, whether through HTTP, gRPC or a queue producer.
 */
import { isIP } from 'node:net'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'

/** RFC 1123 label: lowercase letters, digits and `-`, 1–63 characters, no `-` at either end. */
export const Rfc1123Label = v.pipe(
  v.string(),
  v.regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be an RFC 1123 label: lowercase letters, digits and -, at most 63, not starting or ending with -',
  ),
)

export const Ipv4 = v.pipe(
  v.string(),
  v.check((s) => isIP(s) === 4, 'must be an IPv4 address'),
)
export const IpAddress = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) !== 0, 'must be an IP address'),
)
const isCidr = (s: string) => /^[0-9a-fA-F:.]+\/\d{1,3}$/.test(s) && IPCIDR.isValidCIDR(s)

export const Cidr = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for a CIDR'),
  v.check(isCidr, 'must be a CIDR'),
  v.check((s) => {
    const [addr] = s.split('/')
    // valibot runs every check even after one failed: a malformed CIDR reaches here too,
    // and the check above already reports it.
    if (isIP(addr ?? '') !== 4 || !isCidr(s)) return true
    return new IPCIDR(s).start() === addr
  }, 'must be a network address: no host bits set after the prefix'),
)
export const Mac = v.pipe(
  v.string(),
  v.regex(/^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/, 'must be a MAC address like 52:54:00:12:34:56'),
  v.check((s) => (Number.parseInt(s.slice(0, 2), 16) & 1) === 0, 'must be a unicast MAC address'),
  v.transform((s) => s.toLowerCase()),
)

/** True when `ip` lies inside `cidr` (same address family). */
export function cidrContains(cidr: string, ip: string): boolean {
  try {
    return new IPCIDR(cidr).contains(ip)
  } catch {
    return false
  }
}

function cidrVersion(cidr: string): 4 | 6 {
  return isIP(cidr.split('/')[0] ?? '') === 6 ? 6 : 4
}

export const Subnet = v.pipe(
  v.strictObject({ cidr: Cidr, gateway: v.optional(IpAddress), dhcp: v.optional(v.boolean()) }),
  v.forward(
    v.check(
      (s) => s.gateway === undefined || cidrContains(s.cidr, s.gateway),
      'gateway must lie inside the network',
    ),
    ['gateway'],
  ),
)

export const ResourceGroupSpec = v.pipe(
  v.strictObject({
    tenantId: Rfc1123Label,
    network: v.pipe(
      v.strictObject({ cidr: Cidr, gateway: IpAddress }),
      v.forward(
        v.check((n) => cidrContains(n.cidr, n.gateway), 'gateway must lie inside the network'),
        ['gateway'],
      ),
    ),
    extraSubnets: v.optional(v.pipe(v.array(Subnet), v.maxLength(16, 'at most 16 extra subnets'))),
    dhcpServer: v.optional(Ipv4),
    implementation: v.optional(v.picklist(['SharedCentral'], 'must be SharedCentral')),
  }),
  v.forward(
    v.check(
      (g) => cidrVersion(g.network.cidr) === 4,
      'the primary network must be IPv4 (OVN has no IPv6 NAT; add IPv6 as an extra subnet)',
    ),
    ['network', 'cidr'],
  ),
)
export type ResourceGroupSpec = v.InferOutput<typeof ResourceGroupSpec>

export const HostAccess = v.picklist(
  ['None', 'FabricAccess', 'PublicAccess'],
  'must be None, FabricAccess or PublicAccess',
)
export type HostAccess = v.InferOutput<typeof HostAccess>

export const ManagedResourceSpec = v.pipe(
  v.strictObject({
    resourceGroup: Rfc1123Label,
    type: v.optional(v.picklist(['BareMetal'], 'must be BareMetal'), 'BareMetal'),
    hostMAC: Mac,
    hostIP: v.optional(IpAddress),
    dpu: v.strictObject({
      id: Rfc1123Label,
      ips: v.pipe(
        v.array(Ipv4),
        v.minLength(1, 'must list the uplink IP'),
        v.maxLength(2, 'lists the uplink IP and the NAT IP, no more'),
      ),
    }),
    hostAccess: v.optional(HostAccess, 'None'),
    identifier: v.optional(v.pipe(v.string(), v.maxLength(253, 'at most 253 characters'))),
  }),
  v.forward(
    v.check(
      (m) => m.hostAccess === 'None' || m.dpu.ips.length === 2,
      'FabricAccess and PublicAccess need the DPU NAT IP as the second address',
    ),
    ['dpu', 'ips'],
  ),
  v.forward(
    v.check(
      (m) => m.hostAccess === 'None' || m.hostIP === undefined || isIP(m.hostIP) === 4,
      'IPv6 hosts cannot have FabricAccess or PublicAccess: OVN does not NAT IPv6',
    ),
    ['hostAccess'],
  ),
  v.forward(
    v.check(
      (m) => m.dpu.ips.length < 2 || m.dpu.ips[0] !== m.dpu.ips[1],
      'the NAT IP must differ from the uplink IP',
    ),
    ['dpu', 'ips'],
  ),
)
export type ManagedResourceSpec = v.InferOutput<typeof ManagedResourceSpec>

export const PublicIpSpec = v.strictObject({ ip: Ipv4 })
export type PublicIpSpec = v.InferOutput<typeof PublicIpSpec>

export interface Condition {
  readonly type: string
  readonly status: 'True' | 'False' | 'Unknown'
  readonly reason: string
  readonly message: string
  readonly lastTransitionTime: string
}

export type GroupPhase = 'Provisioning' | 'Ready' | 'Configuring' | 'Terminating' | 'Failed'
export type HostPhase = 'Attaching' | 'Ready' | 'Configuring' | 'Detaching' | 'Isolated' | 'Failed'

export interface ResourceGroupStatus {
  phase: GroupPhase
  conditions: Condition[]
  snatIPs: string[]
  managedResourceCount: number
  softwareNetworkConfiguration?: { ovnService: string; logicalNetwork: string }
  observedVersion: number
  configsSynced: boolean
}

export interface ManagedResourceStatus {
  phase: HostPhase
  conditions: Condition[]
  hostAccessIPs?: { hostIP?: string; fabricIP?: string; publicIP?: string }
  logicalPortReference?: { logicalPort: string; dpu: string }
  /** What the DPU agent acknowledged: its host port and relay port. */
  agent?: { hostPort: string; relayPort?: string; ovnInstalled: boolean; specVersion: number }
  observedVersion: number
  configsSynced: boolean
}

export interface PublicIpStatus {
  allocated: boolean
  allocatedTo?: string
}

/** A stored object: spec, its version, status, and whether deletion was asked for. */
export interface StoredObject<Spec, Status> {
  readonly name: string
  readonly spec: Spec
  readonly specVersion: number
  readonly status: Status
  readonly deletion?: { readonly requestedAt: string; readonly force: boolean }
  readonly createdAt: string
  readonly updatedAt: string
}

export type ResourceGroup = StoredObject<ResourceGroupSpec, ResourceGroupStatus>
export type ManagedResource = StoredObject<ManagedResourceSpec, ManagedResourceStatus>

/** Sets (or replaces) one condition; keeps `lastTransitionTime` when the status is unchanged. */
export function setCondition(
  conditions: readonly Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
  now = new Date(),
): Condition[] {
  const previous = conditions.find((c) => c.type === next.type)
  const lastTransitionTime =
    previous && previous.status === next.status ? previous.lastTransitionTime : now.toISOString()
  return [...conditions.filter((c) => c.type !== next.type), { ...next, lastTransitionTime }]
}

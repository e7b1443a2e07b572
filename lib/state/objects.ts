/**
 * Hydrazine's public objects: what a client asks for (spec) and what Hydrazine reports back
 * (status, `statuses.ts`). The valibot schemas here validate every spec that enters the
 * system, whether through HTTP, gRPC or a queue producer; the gRPC messages
 * (`proto/hydrazine/v1/resources.proto`) are checked against them
 * (`api/grpc/model.test.ts`).
 */
import { isIP } from 'node:net'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'
import { canonicalIp, parseIp } from '../ipam/address.ts'
import { notPublic } from '../ipam/public-ips.ts'
import { addressPlanIssues, GroupPools, type PlanIssue, Reservations } from './group-network.ts'
import { DpuId, Rfc1123Label } from './labels.ts'
import { Policies } from './policies.ts'
import type {
  Condition,
  DpuStatus,
  ManagedResourceStatus,
  ResourceGroupStatus,
} from './statuses.ts'

export {
  Condition,
  DpuStatus,
  GroupPhase,
  HostPhase,
  ManagedResourceStatus,
  PublicIpStatus,
  ResourceGroupStatus,
} from './statuses.ts'

export { Rfc1123Label }

export const Ipv4 = v.pipe(
  v.string(),
  v.check((s) => isIP(s) === 4, 'must be an IPv4 address'),
)
export const Ipv6 = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) === 6 && !s.includes('%'), 'must be an IPv6 address (no zone)'),
  v.transform(canonicalIp),
)
export const IpAddress = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) !== 0, 'must be an IP address'),
)
/**
 * The widest networks a group may have: an IPv4 network's pool covers all of it, and IPAM
 * keeps pools under 2^20 addresses (/12); IPv6 pools are bounded, but a network wider
 * than a /48 is a site's, not a tenant's.
 */
export const MIN_PREFIX = { v4: 12, v6: 48 } as const

const isCidr = (s: string) => /^[0-9a-fA-F:.]+\/\d{1,3}$/.test(s) && IPCIDR.isValidCIDR(s)

export const Cidr = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for a CIDR'),
  v.check(isCidr, 'must be a CIDR'),
  v.check((s) => {
    const [addr = ''] = s.split('/')
    // valibot runs every check even after one failed: a malformed CIDR reaches here too,
    // and the check above already reports it.
    if (!isCidr(s)) return true
    const host = new IPCIDR(`${addr}/${isIP(addr) === 6 ? 128 : 32}`)
    return new IPCIDR(s).start({ type: 'bigInteger' }) === host.start({ type: 'bigInteger' })
  }, 'must be a network address: no host bits set after the prefix'),
  v.check((s) => {
    const [addr = '', length = ''] = s.split('/')
    const prefix = Number(length)
    if (!isCidr(s)) return true
    return isIP(addr) === 6
      ? prefix >= MIN_PREFIX.v6 && prefix <= 126
      : prefix >= MIN_PREFIX.v4 && prefix <= 30
  }, `must be an IPv4 network from /${MIN_PREFIX.v4} to /30 or an IPv6 network from /${MIN_PREFIX.v6} to /126`),
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

/**
 * A group's IPv6 network beside its IPv4 `network` (dual-stack): a /64 whose gateway the
 * group's router takes and announces in router advertisements (SLAAC). Every host of the
 * group takes its SLAAC address there, its MAC's EUI-64 identifier in the /64, as Neutron
 * does for a SLAAC subnet: the host configures it by itself, and Hydrazine knows it.
 */
export const Network6 = v.pipe(
  v.strictObject({ cidr: Cidr, gateway: IpAddress }),
  v.forward(
    v.check(
      (n) => cidrVersion(n.cidr) === 6 && n.cidr.endsWith('/64'),
      'must be an IPv6 /64 (hosts take their SLAAC addresses in it)',
    ),
    ['cidr'],
  ),
  v.forward(
    v.check((n) => cidrContains(n.cidr, n.gateway), 'gateway must lie inside the network'),
    ['gateway'],
  ),
)

/**
 * A group's DNS (OVN's native DNS, answered on the group's own switch): each host is
 * `<hostname>.<group>.<zone>` (the zone is the operator's `HYDRAZINE_DNS_ZONE`). On unless
 * `enabled: false`.
 */
export const GroupDns = v.strictObject({ enabled: v.optional(v.boolean()) })

/** How a group is built: `SharedCentral`, the operator's shared OVN central. */
export const GroupImplementation = v.picklist(['SharedCentral'], 'must be SharedCentral')

export const ResourceGroupSpec = v.pipe(
  v.strictObject({
    tenantId: Rfc1123Label,
    /** The group's IPv4 network; a group without one is IPv6 only (`network6`). */
    network: v.optional(
      v.pipe(
        v.strictObject({ cidr: Cidr, gateway: IpAddress }),
        v.forward(
          v.check((n) => cidrContains(n.cidr, n.gateway), 'gateway must lie inside the network'),
          ['gateway'],
        ),
      ),
    ),
    extraSubnets: v.optional(v.pipe(v.array(Subnet), v.maxLength(16, 'at most 16 extra subnets'))),
    /** The group's IPv6 network (dual-stack): every host also gets its SLAAC address there. */
    network6: v.optional(Network6),
    dhcpServer: v.optional(Ipv4),
    implementation: v.optional(GroupImplementation),
    /** Security policies between the group's hosts and with CIDRs (`policies.ts`). */
    policies: v.optional(Policies),
    dns: v.optional(GroupDns),
    /** Named pools within the group's subnets, asked for by hosts (`group-network.ts`). */
    pools: v.optional(GroupPools),
    /** Addresses IPAM never hands out (`group-network.ts`). */
    reservations: v.optional(Reservations),
  }),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return
    for (const issue of addressPlanIssues(dataset.value)) {
      addIssue({ message: issue.message, path: pathItems(dataset.value, issue) })
    }
  }),
  v.forward(
    v.check(
      (g) => g.network === undefined || cidrVersion(g.network.cidr) === 4,
      'must be IPv4 (OVN has no IPv6 NAT; an IPv6 network is network6)',
    ),
    ['network', 'cidr'],
  ),
  v.forward(
    v.check(
      (g) => g.network !== undefined || g.network6 !== undefined,
      'is required (IPv4), unless the group is IPv6 only: then network6 is',
    ),
    ['network'],
  ),
  v.forward(
    v.check(
      (g) => g.dhcpServer === undefined || g.network !== undefined,
      'relays IPv4 DHCP: the group needs an IPv4 network',
    ),
    ['dhcpServer'],
  ),
)
export type ResourceGroupSpec = v.InferOutput<typeof ResourceGroupSpec>

/** valibot's path items for an issue's keys, so that `getDotPath` names the field. */
function pathItems(input: unknown, issue: PlanIssue): [v.IssuePathItem, ...v.IssuePathItem[]] {
  let at = input as Record<string | number, unknown>
  const items = issue.path.map((key) => {
    const value = at?.[key]
    const item = { type: 'object', origin: 'value', input: at, key: String(key), value }
    at = value as Record<string | number, unknown>
    return item as v.IssuePathItem
  })
  return items as [v.IssuePathItem, ...v.IssuePathItem[]]
}

export const HostAccess = v.picklist(
  ['None', 'FabricAccess', 'PublicAccess'],
  'must be None, FabricAccess or PublicAccess',
)
export type HostAccess = v.InferOutput<typeof HostAccess>

export const ResourceType = v.picklist(['BareMetal'], 'must be BareMetal')

/** A Linux interface name (a DPU's host port): at most 15 characters, no '/', ':' or spaces. */
export const InterfaceName = v.pipe(
  v.string(),
  v.regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$/,
    'must be a Linux interface name (at most 15 characters)',
  ),
)

const FabricIps = v.pipe(
  v.array(Ipv4),
  v.minLength(1, 'must list the encap (uplink) IP'),
  v.maxLength(2, 'lists the encap IP and the NAT IP, no more'),
  v.check((ips) => ips.length < 2 || ips[0] !== ips[1], 'the NAT IP must differ from the encap IP'),
)

/**
 * A DPU in the operator's inventory (`PUT /v1/dpus/{id}`, operators only): the tenant it
 * is assigned to, its fabric IPs `[encapIp, natIp?]` and the host ports a host may be
 * attached to. These physical facts come from the operator or Carbide, never a tenant.
 */
export const DpuSpec = v.strictObject({
  tenantId: v.optional(Rfc1123Label),
  fabricIps: FabricIps,
  /**
   * The DPU's IPv6 NAT address on the fabric (needs the controller's
   * `HYDRAZINE_FABRIC_DUMMY_IP6`): its hosts' IPv6 leaves as it, a FabricAccess host is
   * reached at it, and it is the next hop of their public /128s.
   */
  natIp6: v.optional(Ipv6),
  hostPorts: v.optional(
    v.pipe(
      v.array(InterfaceName),
      v.maxLength(256, 'at most 256 host ports'),
      v.check((ports) => new Set(ports).size === ports.length, 'must not repeat a port'),
    ),
    [],
  ),
})
export type DpuSpec = v.InferOutput<typeof DpuSpec>

/** What a host and each of its interfaces ask for: one port on one group's network. */
const hostPortFields = {
  resourceGroup: Rfc1123Label,
  type: v.optional(ResourceType, 'BareMetal'),
  hostMAC: Mac,
  hostIP: v.optional(IpAddress),
  dpu: v.strictObject({ id: DpuId, ips: v.optional(FabricIps), natIp6: v.optional(Ipv6) }),
  hostAccess: v.optional(HostAccess, 'None'),
  identifier: v.optional(InterfaceName),
  /** The host's name in its group's DNS; default its own name. Unique in the group. */
  hostname: v.optional(Rfc1123Label),
  /** The named pool of its group the host's address comes from (default: `default`). */
  pool: v.optional(Rfc1123Label),
}

type PortChoice = { readonly pool?: string | undefined; readonly hostIP?: string | undefined }
const poolOrAddress = (m: PortChoice) => m.pool === undefined || m.hostIP === undefined
const POOL_OR_ADDRESS = 'give hostIP or pool, not both'
const accessWithIpv4 = (m: PortChoice & { readonly hostAccess: string }) =>
  m.hostAccess === 'None' || m.hostIP === undefined || isIP(m.hostIP) === 4
const ACCESS_WITH_IPV4 =
  "a host whose hostIP is IPv6 cannot have FabricAccess or PublicAccess: its access follows its IPv4 address (only an IPv6-only group's hosts, on an IPv6 fabric, have IPv6 access alone)"

/** At most this many interfaces beside a host's own port. */
export const MAX_HOST_INTERFACES = 8

/**
 * Another interface of a host (a second NIC, a VF): its own port, on its own DPU's host
 * port, in its own group (a host may sit on two groups through two interfaces, each DPU
 * serving one). It is kept as a ManagedResource of its own, `<host>-<name>`, with its
 * own status; only its host changes or deletes it.
 */
export const HostInterface = v.pipe(
  v.strictObject({
    /** Short: `<host>-<name>` names the interface's own ManagedResource. */
    name: v.pipe(Rfc1123Label, v.maxLength(15, 'must be at most 15 characters')),
    ...hostPortFields,
  }),
  v.forward(
    v.check((m) => poolOrAddress(m), POOL_OR_ADDRESS),
    ['pool'],
  ),
  v.forward(
    v.check((m) => accessWithIpv4(m), ACCESS_WITH_IPV4),
    ['hostAccess'],
  ),
)
export type HostInterface = v.InferOutput<typeof HostInterface>

/**
 * A request for a ManagedResource (a host). A tenant names only `dpu: {id}` of a DPU
 * assigned to it and an `identifier` from that DPU's host ports; the fabric IPs come from
 * the inventory. An operator may also give `dpu.ips` (and a new identifier): the inventory
 * learns them, as long as they agree with what it holds. `interfaces` lists the host's
 * other ports (`HostInterface`), each with its own MAC.
 */
export const ManagedResourceRequest = v.pipe(
  v.strictObject({
    ...hostPortFields,
    interfaces: v.optional(
      v.pipe(
        v.array(HostInterface),
        v.maxLength(MAX_HOST_INTERFACES, `at most ${MAX_HOST_INTERFACES} interfaces`),
        v.check(
          (list) => new Set(list.map((i) => i.name)).size === list.length,
          'must not repeat an interface name',
        ),
      ),
    ),
  }),
  v.forward(
    v.check((m) => poolOrAddress(m), POOL_OR_ADDRESS),
    ['pool'],
  ),
  v.forward(
    v.check((m) => accessWithIpv4(m), ACCESS_WITH_IPV4),
    ['hostAccess'],
  ),
  v.forward(
    v.check(
      (m) =>
        new Set(
          [m.hostMAC, ...(m.interfaces ?? []).map((i) => i.hostMAC)].map((x) => x.toLowerCase()),
        ).size ===
        1 + (m.interfaces?.length ?? 0),
      'each interface has a MAC of its own',
    ),
    ['interfaces'],
  ),
)
export type ManagedResourceRequest = v.InferOutput<typeof ManagedResourceRequest>

/**
 * A host's desired spec as stored: the request with its physical facts filled in from the
 * inventory — the DPU's fabric IPs `[encapIp, natIp?]`, its IPv6 NAT address and the host port.
 */
export interface ManagedResourceSpec extends Omit<ManagedResourceRequest, 'dpu' | 'identifier'> {
  readonly dpu: { readonly id: string; readonly ips: readonly string[]; readonly natIp6?: string }
  /** The DPU's host port; absent only when the inventory names none (the agent's default). */
  readonly identifier?: string
  /** On an interface's own ManagedResource: the host it is an interface of. */
  readonly interfaceOf?: string
}

/** A public IP of the operator's pools: IPv4 (announced as a /32) or IPv6 (a /128). */
export const PublicIpSpec = v.strictObject({
  ip: v.pipe(
    IpAddress,
    v.check((s) => !s.includes('%'), 'must be an IP address (no zone)'),
    v.rawCheck(({ dataset, addIssue }) => {
      // Only an address that passed the checks before this one parses.
      const why = dataset.typed && !dataset.issues ? notPublic(parseIp(dataset.value)) : undefined
      if (why) addIssue({ message: `cannot be a public IP: ${why}` })
    }),
    v.transform(canonicalIp),
  ),
})
export type PublicIpSpec = v.InferOutput<typeof PublicIpSpec>

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

export type Dpu = StoredObject<DpuSpec, DpuStatus>

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

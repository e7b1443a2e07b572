/**
 * Hydrazine's public objects: what a client asks for (spec) and what Hydrazine reports back
 * (status, `statuses.ts`). The valibot schemas here validate every spec that enters the
 * system, whether through HTTP, gRPC or a queue producer; the gRPC messages
 * (`proto/hydrazine/v1/resources.proto`) are checked against them
 * (`api/grpc/model.test.ts`), and the OpenAPI document's schemas are generated from them
 * (`api/http/openapi-model.ts`): a field's `v.description` is its documentation there.
 * The address formats are `address-schemas.ts`'s.
 */
import { isIP } from 'node:net'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'
import { canonicalIp, parseIp } from '../ipam/address.ts'
import { notPublic } from '../ipam/public-ranges.ts'
import { Cidr, IpAddress, Ipv4, Ipv6, Mac } from './address-schemas.ts'
import { addressPlanIssues, GroupPools, type PlanIssue, Reservations } from './group-network.ts'
import { DpuId, Rfc1123Label } from './labels.ts'
import { NetworkImplementationType } from './network-implementation.ts'
import { Policies } from './policies.ts'
import type {
  Condition,
  DpuStatus,
  ManagedResourceStatus,
  PublicIpStatus,
  ResourceGroupStatus,
} from './statuses.ts'

export { Cidr, IpAddress, Ipv4, Ipv6, Mac, MIN_PREFIX } from './address-schemas.ts'
export {
  FabricIdentifiers,
  implementationOf,
  NETWORK_IMPLEMENTATION_TYPES,
  NetworkImplementationType,
} from './network-implementation.ts'
export {
  Condition,
  DpuStatus,
  GroupPhase,
  HostPhase,
  ManagedResourceStatus,
  PublicIpHold,
  PublicIpStatus,
  ResourceGroupStatus,
} from './statuses.ts'
export { Rfc1123Label }

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
  v.description(
    "dual-stack: the group's IPv6 network, a /64 its router advertises (SLAAC); every host also takes its SLAAC address there (its MAC's EUI-64 identifier), shown as status.hostAccessIPs.hostIPv6. No pool may lie in it, no hostIP either",
  ),
)

/**
 * A group's DNS (OVN's native DNS, answered on the group's own switch): each host is
 * `<hostname>.<group>.<zone>` (the zone is the operator's `HYDRAZINE_DNS_ZONE`). On unless
 * `enabled: false`.
 */
export const GroupDns = v.pipe(
  v.strictObject({ enabled: v.optional(v.pipe(v.boolean(), v.metadata({ default: true }))) }),
  v.description(
    "the group's DNS: each host resolves as `<hostname>.<group>.<zone>` (the operator's HYDRAZINE_DNS_ZONE) inside the group only, answered by OVN for queries sent through the group's network (e.g. to its gateway)",
  ),
)

export const ResourceGroupSpec = v.pipe(
  v.strictObject({
    tenantId: Rfc1123Label,
    network: v.optional(
      v.pipe(
        v.strictObject({ cidr: Cidr, gateway: IpAddress }),
        v.forward(
          v.check((n) => cidrContains(n.cidr, n.gateway), 'gateway must lie inside the network'),
          ['gateway'],
        ),
        v.description(
          'the IPv4 network (immutable); required unless the group is IPv6 only (network6 alone)',
        ),
      ),
    ),
    extraSubnets: v.optional(v.pipe(v.array(Subnet), v.maxLength(16, 'at most 16 extra subnets'))),
    network6: v.optional(Network6),
    dhcpServer: v.optional(Ipv4),
    networkImplementationType: v.optional(NetworkImplementationType),
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
  tenantId: v.optional(v.pipe(Rfc1123Label, v.description('the tenant whose hosts may use it'))),
  fabricIps: v.pipe(FabricIps, v.description('[encapIp, natIp?]')),
  natIp6: v.optional(
    v.pipe(
      Ipv6,
      v.description(
        "the DPU's IPv6 NAT address on the fabric (stored canonical; needs the controller's HYDRAZINE_FABRIC_DUMMY_IP6): its hosts' IPv6 leaves as it (NAT66), a FabricAccess host is reached at it (status.hostAccessIPs.fabricIPv6), and it is the next hop of their public /128s. Unique among DPUs, like the fabric IPs",
      ),
    ),
  ),
  hostPorts: v.optional(
    v.pipe(
      v.array(InterfaceName),
      v.maxLength(256, 'at most 256 host ports'),
      v.check((ports) => new Set(ports).size === ports.length, 'must not repeat a port'),
      v.metadata({ uniqueItems: true }),
    ),
    [],
  ),
  hostMacs: v.optional(
    v.pipe(
      v.record(InterfaceName, Mac),
      v.check((macs) => Object.keys(macs).length <= 256, 'at most 256 host MACs'),
      v.description(
        'the MAC of the host NIC behind each host port (by port name): a port with one joins the admin network (HYDRAZINE_ADMIN_NETWORK) while no tenant host holds its DPU, locked to that MAC',
      ),
    ),
  ),
})
export type DpuSpec = v.InferOutput<typeof DpuSpec>

/** What a host and each of its interfaces ask for: one port on one group's network. */
const hostPortFields = {
  resourceGroup: Rfc1123Label,
  type: v.optional(ResourceType, 'BareMetal'),
  hostMAC: Mac,
  hostIP: v.optional(IpAddress),
  dpu: v.strictObject({
    id: v.pipe(DpuId, v.description('a DPU of the inventory assigned to the tenant')),
    ips: v.optional(
      v.pipe(
        FabricIps,
        v.description(
          'operators only: [encapIp, natIp?]; a DPU missing from the inventory is added with them',
        ),
      ),
    ),
    natIp6: v.optional(
      v.pipe(
        Ipv6,
        v.description(
          "the DPU's IPv6 NAT address, filled in from the inventory (its natIp6) when it has one; a request may give it (operators, like ips): it must agree with the inventory",
        ),
      ),
    ),
  }),
  hostAccess: v.optional(HostAccess, 'None'),
  identifier: v.optional(
    v.pipe(
      InterfaceName,
      v.description("one of the DPU's host ports; may be left out when it has exactly one"),
    ),
  ),
  hostname: v.optional(
    v.pipe(
      Rfc1123Label,
      v.description(
        "its name in its group's DNS (`<hostname>.<group>.<zone>`), unique in the group (409 otherwise); default its own name (an interface's: its own ManagedResource's, `<host>-<name>`)",
      ),
    ),
  ),
  pool: v.optional(
    v.pipe(
      Rfc1123Label,
      v.description(
        "a named pool of the group (its `pools`) the host's address comes from; default `default`. Not with hostIP",
      ),
    ),
  ),
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
    name: v.pipe(
      Rfc1123Label,
      v.maxLength(15, 'must be at most 15 characters'),
      v.description(
        "unique among the host's interfaces; its own ManagedResource is `<host>-<name>` (at most 63 characters in all)",
      ),
    ),
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
  v.description(
    "another port of a host: the fields of the host's own port, and a name; it may join another group, through another DPU",
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
        v.description(
          "the host's other ports (a second NIC, a VF), names unique, each MAC its own (none the host's). Each is kept as a ManagedResource of its own, `<host>-<name>`, with its own status (its dpu filled in from the inventory there); it is changed and deleted only through this host, and deleted when the host's spec no longer lists it",
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
    v.examples(['203.0.113.10', '2001:db8:ff::5']),
    v.description(
      'IPv4 (announced as a /32) or IPv6 (a /128), in canonical form; each family is a pool of its own',
    ),
  ),
})
export type PublicIpSpec = v.InferOutput<typeof PublicIpSpec>
/** A public IP as the API answers it: the address, and whom or what holds it. */
export type PublicIp = PublicIpSpec & PublicIpStatus

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

import { isIP } from 'node:net'
import * as v from 'valibot'
import { type GroupPolicyRule, GroupPolicyRuleSchema } from './policy-rules.ts'

/**
 * What one group's OVN topology is compiled from: the group's network, its members
 * (hosts) and the DPU each sits behind. Always the FULL state of the group: the apply
 * converges NB to exactly this, so concurrent applies never lose each other's hosts as
 * long as each passes the whole current group.
 */
export interface GroupTopologySpec {
  /** Group name; row names and owner `external_ids` derive from it. */
  readonly name: string
  /** The group's subnet, e.g. `10.10.10.0/24`. May overlap other groups'. */
  readonly cidr: string
  /** The distributed router's address in `cidr`, e.g. `10.10.10.1`. */
  readonly gateway: string
  /**
   * The group's other subnets (IPv4 or IPv6), on the same switch. One with a `gateway`
   * is routed: the distributed router takes that address in it, and its IPv4 hosts reach
   * the fabric like the primary subnet's. One without is on-link only: its hosts reach
   * each other, nothing else.
   */
  readonly extraSubnets?: readonly GroupSubnet[]
  /**
   * The group's IPv6 /64 (dual-stack): the distributed router takes `gateway` in it and
   * sends router advertisements for SLAAC, and each member's `ip6` lies in it.
   */
  readonly network6?: { readonly cidr: string; readonly gateway: string }
  /**
   * Reserved fabric address with prefix length, e.g. `172.18.0.254/24`, put on every
   * gateway router's fabric-side port (OVN routes only onto ports with an address).
   */
  readonly dummyFabricIp: string
  /** Next hop on the fabric for the gateway routers' default route. */
  readonly fabricGatewayIp?: string
  /**
   * Reserved IPv6 fabric address with prefix length, e.g. `fd00:fab::fe/64`. Set, the
   * group's routed IPv6 leaves through each DPU like IPv4 does (NAT66 to the DPU's
   * `natIp6`); absent, IPv6 stays inside the group.
   */
  readonly dummyFabricIp6?: string
  /** Next hop on the fabric for the gateway routers' IPv6 default route. */
  readonly fabricGatewayIp6?: string
  /** `network_name` of the localnet ports (the DPU's bridge mapping). Default `physnet`. */
  readonly physicalNetwork?: string
  readonly members: readonly GroupMember[]
  readonly dhcpRelayPorts?: readonly DhcpRelayPort[]
  /**
   * The group's DNS (OVN's native DNS): each built host's name resolves to its address
   * inside the group only (`dns.ts`). Absent: the group has no DNS records.
   */
  readonly dns?: GroupDns
  /**
   * Security policies between the group's hosts and with CIDRs (`policies.ts`): port
   * groups and ACLs; absent or empty: none, and all traffic is allowed.
   */
  readonly policies?: readonly GroupPolicyRule[]
}

export interface GroupDns {
  /** The zone group domains live in, e.g. `hydrazine.internal`: hosts are `<name>.<group>.<zone>`. */
  readonly zone: string
}

export type HostAccess = 'None' | 'FabricAccess' | 'PublicAccess'

export interface GroupSubnet {
  /** e.g. `10.20.0.0/24` or `fd00:20::/64`. */
  readonly cidr: string
  /** The distributed router's address in `cidr`; without one the subnet is not routed. */
  readonly gateway?: string
}

export interface GroupMember {
  readonly hostName: string
  /** Logical switch port name; the DPU agent binds `external_ids:iface-id` to it. Unique in NB. */
  readonly logicalPort: string
  readonly mac: string
  readonly ip: string
  /** In a dual-stack group: the host's SLAAC address in `network6`, beside `ip`. */
  readonly ip6?: string
  /**
   * `id` is the DPU's OVS `system-id` (its chassis name); `natIp` its reserved NAT ("DC")
   * IP, `natIp6` its IPv6 one.
   */
  readonly dpu: { readonly id: string; readonly natIp?: string; readonly natIp6?: string }
  readonly access: HostAccess
  readonly publicIp?: string
  /** A PublicAccess host's public IPv6 address (NAT66 to its own IPv6 address). */
  readonly publicIp6?: string
  /** The host's name in the group's DNS (an RFC 1123 label); default `hostName`. */
  readonly dnsName?: string
}

export interface DhcpRelayPort {
  readonly dpuId: string
  readonly portName: string
  readonly mac?: string
  /** The relay's own address in the group's subnet (needs `mac`). */
  readonly ip?: string
}

const name = v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'a short name'))
const ip = v.pipe(
  v.string(),
  v.check((s) => isIP(s) !== 0, 'an IP address'),
)
const ip4 = v.pipe(
  v.string(),
  v.check((s) => isIP(s) === 4, 'an IPv4 address'),
)
const ip6 = v.pipe(
  v.string(),
  v.check((s) => isIP(s) === 6, 'an IPv6 address'),
)
const cidr = v.pipe(
  v.string(),
  v.check((s) => {
    const [addr, len, ...rest] = s.split('/')
    const max = isIP(addr ?? '') === 4 ? 32 : isIP(addr ?? '') === 6 ? 128 : -1
    return rest.length === 0 && len !== undefined && /^\d+$/.test(len) && Number(len) <= max
  }, 'an address with prefix length'),
)
const mac = v.pipe(v.string(), v.regex(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i, 'a MAC address'))
const label = v.pipe(v.string(), v.regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'a DNS label'))
const zone = v.pipe(
  v.string(),
  v.maxLength(125, 'a DNS zone of at most 125 characters'),
  v.regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/,
    'a DNS zone',
  ),
)

/** One member, validated on its own when a compile memo has not seen it before. */
export const GroupMemberSchema = v.object({
  hostName: name,
  logicalPort: v.pipe(v.string(), v.minLength(1)),
  mac,
  ip,
  ip6: v.optional(ip6),
  dpu: v.object({
    id: v.pipe(v.string(), v.minLength(1)),
    natIp: v.optional(ip4),
    natIp6: v.optional(ip6),
  }),
  access: v.picklist(['None', 'FabricAccess', 'PublicAccess']),
  publicIp: v.optional(ip4),
  publicIp6: v.optional(ip6),
  dnsName: v.optional(label),
})

export const GroupTopologySpecSchema = v.object({
  name,
  cidr,
  gateway: ip,
  extraSubnets: v.optional(v.array(v.object({ cidr, gateway: v.optional(ip) }))),
  network6: v.optional(
    v.object({
      cidr: v.pipe(
        cidr,
        v.check((s) => isIP(s.split('/')[0] ?? '') === 6 && s.endsWith('/64'), 'an IPv6 /64'),
      ),
      gateway: ip6,
    }),
  ),
  dummyFabricIp: cidr,
  fabricGatewayIp: v.optional(ip4),
  dummyFabricIp6: v.optional(
    v.pipe(
      cidr,
      v.check((s) => isIP(s.split('/')[0] ?? '') === 6, 'an IPv6 address with prefix length'),
    ),
  ),
  fabricGatewayIp6: v.optional(ip6),
  physicalNetwork: v.optional(name),
  members: v.array(GroupMemberSchema),
  dhcpRelayPorts: v.optional(
    v.array(
      v.object({
        dpuId: v.pipe(v.string(), v.minLength(1)),
        portName: v.pipe(v.string(), v.minLength(1)),
        mac: v.optional(mac),
        ip: v.optional(ip),
      }),
    ),
  ),
  dns: v.optional(v.object({ zone })),
  policies: v.optional(v.array(GroupPolicyRuleSchema)),
})

import { type Announcement, type AnnouncementSource, publicPrefix } from '../../lib/frr/index.ts'
import type { Ipam } from '../../lib/ipam/index.ts'
import { implementationOf } from '../../lib/model/objects.ts'
import type { StateStore } from '../../lib/state/store.ts'

/**
 * What FRR must announce, from the state Hydrazine keeps: every allocated public IP whose
 * host still exists and still asks for PublicAccess, as `PublicIP/32` via that host's DPU
 * NAT IP — an IPv6 one as `/128` via the DPU's IPv6 NAT address, while the fabric has
 * IPv6 (`fabric6`, default true) and the host's group an IPv6 network. (A host whose
 * access was lowered, or whose group dropped its IPv6 network, holds its IP only until
 * `publicip.release` returns it: a resync in that gap must not announce it again.)
 */
export function storeAnnouncementSource(
  store: StateStore,
  ipam: Ipam,
  options: { readonly fabric6?: boolean } = { fabric6: true },
): AnnouncementSource {
  return {
    async desired() {
      const out: Announcement[] = []
      const allocated = (await ipam.listPublicIps()).filter((p) => p.allocatedTo)
      // Every holder in one round trip: a resync of 10,000 IPs is not 10,000 reads.
      const hosts = new Map(
        (await store.hosts.getMany([...new Set(allocated.map((p) => p.allocatedTo ?? ''))])).map(
          (h) => [h.name, h],
        ),
      )
      const groups = await store.groups.getMany([
        ...new Set([...hosts.values()].map((h) => h.spec.resourceGroup)),
      ])
      const ipv6Groups = new Set(
        groups.filter((g) => g.spec.network6 !== undefined).map((g) => g.name),
      )
      // A Fabric host's public IP is its DPU's to announce (marked for the border), never ours.
      const fabricGroups = new Set(
        groups.filter((g) => implementationOf(g.spec) === 'Fabric').map((g) => g.name),
      )
      for (const pip of allocated) {
        const host = hosts.get(pip.allocatedTo ?? '')
        const v6 = pip.ip.includes(':')
        // Without an IPv6 fabric, or an IPv6 network, no NAT66 rule leads a /128 anywhere.
        if (v6 && (!options.fabric6 || !ipv6Groups.has(host?.spec.resourceGroup ?? ''))) continue
        const natIp = v6 ? host?.spec.dpu.natIp6 : host?.spec.dpu.ips[1]
        if (!host || host.deletion || host.spec.hostAccess !== 'PublicAccess' || !natIp) continue
        if (fabricGroups.has(host.spec.resourceGroup)) continue
        out.push({ prefix: publicPrefix(pip.ip), nextHop: natIp })
      }
      return out
    },
  }
}

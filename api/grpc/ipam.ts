/**
 * The GetResourceGroupIpam RPC's answer (`proto/hydrazine/v1/ipam.proto`): a group's
 * address map (`lib/ipam/usage.ts`) as the typed message, field for field the JSON of
 * `GET /v1/resource-groups/{name}/ipam`; only `mapFormat` becomes an enum.
 */

import type { NetworkUsage, SubnetUsage } from '../../lib/ipam/index.ts'
import type { GetResourceGroupIpamResponse } from '../../proto/gen/hydrazine/v1/GetResourceGroupIpamResponse.ts'
import type { IpamMapFormat } from '../../proto/gen/hydrazine/v1/IpamMapFormat.ts'

const MAP_FORMATS: Readonly<Record<SubnetUsage['mapFormat'], IpamMapFormat>> = {
  address: 'IPAM_MAP_FORMAT_ADDRESS',
  runs: 'IPAM_MAP_FORMAT_RUNS',
}

/** The usage as a `GetResourceGroupIpamResponse`; optional fields stay unset when absent. */
export function ipamMessage(usage: NetworkUsage): GetResourceGroupIpamResponse {
  return {
    network: usage.network,
    subnets: usage.subnets.map((s) => ({
      cidr: s.cidr,
      ...(s.name === undefined ? {} : { name: s.name }),
      ...(s.gateway === undefined ? {} : { gateway: s.gateway }),
      dhcp: s.dhcp,
      size: s.size,
      used: s.used,
      reserved: s.reserved,
      free: s.free,
      pools: s.pools.map((p) => ({
        ...(p.name === undefined ? {} : { name: p.name }),
        start: p.start,
        end: p.end,
        size: p.size,
        used: p.used,
        free: p.free,
      })),
      external: s.external.map((r) => ({ start: r.start, end: r.end })),
      mapFormat: MAP_FORMATS[s.mapFormat],
      map: s.map,
    })),
    allocations: usage.allocations.map((a) => ({ owner: a.owner, ip: a.ip })),
  }
}

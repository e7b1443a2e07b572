/**
 * The addresses a host's attach allocates through IPAM, owner-keyed so that a retry
 * takes no second one: the host's own, its SLAAC address in a dual-stack group's
 * `network6`, its group's DHCP relay address on its DPU, and a public IP for PublicAccess.
 */
import { isIP } from 'node:net'
import type { HydrazineError } from '../../lib/errors.ts'
import { eui64Address } from '../../lib/ipam/address.ts'
import { ipv6OwnerOf } from '../../lib/ipam/group-network.ts'
import type { Allocation } from '../../lib/ipam/index.ts'
import { DEFAULT_POOL } from '../../lib/model/group-network.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'
import { failOrRetry, GroupChanged, isPermanent } from './errors.ts'
import { memberSettingsOf, ownsSlaacAddress, relayOwnerOf } from './network.ts'
import { type HostAttempt, setHostStatus } from './status.ts'

/** A host's addresses as its attach allocated them. */
export interface HostAddresses {
  readonly hostIp: string
  readonly hostIpv6?: string
  readonly relayIp?: string
}

/**
 * The host's address, its group's relay address on its DPU (dhcrelay ignores an
 * interface without one: one per group and DPU, kept while the group lives there) and,
 * for PublicAccess, a public IP. A refusal that cannot change (a taken or foreign
 * address, an exhausted pool) makes the host Failed — unless the group's settings
 * changed since `group` was read (its `network6` moved): then it is retried
 * (`GroupChanged`) from the new ones.
 */
export async function allocateAddresses(
  deps: Pick<HandlerDeps, 'ipam' | 'store'>,
  host: HostAttempt,
  group: ResourceGroup,
): Promise<HostAddresses> {
  const failed = (error: HydrazineError) =>
    setHostStatus(deps, host, {
      attempt: host.attempt,
      phase: 'Failed',
      condition: { type: 'Attached', status: 'False', reason: error.code, message: error.message },
    })
  const orFail = async (error: unknown): Promise<never> => {
    if (isPermanent(error)) await groupUnchanged(deps, group, error)
    return failOrRetry(error, failed)
  }
  const { spec } = host
  // A host reached from the fabric takes an IPv4 address from its pool (its IPv6 one is
  // its SLAAC address), so that both families can be NATed.
  const family =
    spec.hostAccess === 'None' || group.spec.network === undefined ? {} : { version: 4 as const }
  const network6 = group.spec.network6
  // An IPv6-only group's host that names no address or pool: its SLAAC address is its own.
  const slaacOnly = network6 && ownsSlaacAddress(group.spec, spec)
  // A named pool is handed out only to hosts that ask for it; the rest share `default`.
  const address = slaacOnly
    ? await deps.ipam
        .allocate(group.name, host.name, { ip: eui64Address(network6.cidr, spec.hostMAC) })
        .catch(orFail)
    : spec.hostIP
      ? await deps.ipam.allocate(group.name, host.name, { ip: spec.hostIP }).catch(orFail)
      : await fromPool(deps, group.name, host.name, { pool: spec.pool, ...family }).catch(orFail)
  // dhcrelay relays IPv4 DHCP: its address is an IPv4 one.
  const relay = group.spec.dhcpServer
    ? await fromPool(deps, group.name, relayOwnerOf(spec.dpu.id), { version: 4 }).catch(orFail)
    : undefined
  // Dual-stack: the host's SLAAC address in the group's IPv6 network, taken in IPAM so
  // that two hosts with one MAC cannot both hold it.
  const v6 = slaacOnly
    ? address
    : network6
      ? await deps.ipam
          .allocate(group.name, ipv6OwnerOf(host.name), {
            ip: eui64Address(network6.cidr, spec.hostMAC),
          })
          .catch(orFail)
      : undefined
  // An IPv6-only host takes no public IPv4 (its public IPv6 comes with publicip.allocate).
  if (spec.hostAccess === 'PublicAccess' && isIP(address.ip) === 4) {
    await deps.ipam.allocatePublicIp(host.name).catch(orFail)
  }
  return {
    hostIp: address.ip,
    ...(v6 ? { hostIpv6: v6.ip } : {}),
    ...(relay ? { relayIp: relay.ip } : {}),
  }
}

/**
 * Throws GroupChanged (retryable) when what the group's members are sent
 * (`memberSettingsOf`: its networks, its DHCP server) is no longer what `group` says, or
 * the group is gone: work computed from `group` is done again from the group as it is now.
 * `cause`: the refusal the old settings led to.
 */
export async function groupUnchanged(
  deps: Pick<HandlerDeps, 'store'>,
  group: ResourceGroup,
  cause?: HydrazineError,
): Promise<void> {
  sameMemberSettings(group, await deps.store.groups.get(group.name), cause)
}

/** `groupUnchanged` against a `current` already read (undefined: the group is gone). */
export function sameMemberSettings(
  group: ResourceGroup,
  current: ResourceGroup | undefined,
  cause?: HydrazineError,
): void {
  if (!current || memberSettingsOf(current.spec) !== memberSettingsOf(group.spec)) {
    throw new GroupChanged(group.name, group.specVersion, cause)
  }
}

/**
 * The owner's address from the named pool, or from `default` when it names none. An
 * address the owner already holds stays its own even where a named pool now lies (the
 * group gained the pool after it was handed out): only a pool asked for by name is held
 * to its ranges (IPAM refuses an address outside them).
 */
async function fromPool(
  deps: Pick<HandlerDeps, 'ipam'>,
  group: string,
  owner: string,
  options: { pool?: string | undefined; version?: 4 },
): Promise<Allocation> {
  if (options.pool === undefined) {
    const held = await deps.ipam.lookup(group, owner)
    if (held && (options.version === undefined || !held.ip.includes(':'))) return held
  }
  return deps.ipam.allocate(group, owner, {
    pool: options.pool ?? DEFAULT_POOL,
    ...(options.version === undefined ? {} : { version: options.version }),
  })
}

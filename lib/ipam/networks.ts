/**
 * Changes to a network's definition: the network itself, its subnets, pools and external
 * reservations. Each change reads the stored definition, computes the next one with the
 * pure rules of `definition.ts`, and commits it in one script that also rebuilds the pool
 * bitmaps from the addresses held (`lua/commit-network.lua`).
 */
import {
  formatIp,
  formatSpan,
  fromHex,
  overlaps,
  parseCidr,
  parseSpan,
  type Span,
  subtract,
  toHex,
} from './address.ts'
import {
  compile,
  droppedSpans,
  exclusionBitmap,
  findSubnet,
  type Layout,
  type NetworkDefinition,
  type NetworkSpec,
  normalizeNetwork,
  normalizeRange,
  normalizeSubnet,
  PoolSchema,
  type PoolSpec,
  parseSpec,
  type RangeSpec,
  type SubnetDefinition,
  type SubnetLayout,
  type SubnetSpec,
  subnetHolding,
  vacatedSpans,
} from './definition.ts'
import { Conflict, InvalidRequest, NotFound, NotInSubnet } from './errors.ts'
import { checkId } from './keys.ts'
import { type LayoutCache, MAX_ATTEMPTS } from './layout-cache.ts'
import { scripts, tuple } from './scripts.ts'

/** How `defineNetwork` treats addresses held where the new definition drops a subnet. */
export interface DefineOptions {
  /**
   * Owners whose names start with this prefix give back what they hold there, in the
   * same step as the change (no allocation can come between), instead of refusing it:
   * owners whose address follows from the definition, such as a host's SLAAC address.
   */
  readonly releaseDropped?: { readonly ownerPrefix: string }
}

/** An address a network change took back from its owner. */
export interface Released {
  readonly owner: string
  readonly ip: string
}

export interface SubnetChange {
  cidr?: string
  /** `null` removes the gateway. */
  gateway?: string | null
  dhcp?: boolean
  name?: string
}

/** What a change asks `commit` to store. */
interface Plan {
  /** The new definition; `undefined` deletes the network. */
  definition: NetworkDefinition | undefined
  /** Ranges that must hold no address for the change to go through. */
  mustBeFree?: Span[]
  force?: boolean
  busy?: (ip: string, owner: string) => string
  /** Ranges whose holders named with `ownerPrefix` give their addresses back. */
  release?: { spans: Span[]; ownerPrefix: string }
}

/** Network, subnet, pool and external-reservation changes of `Ipam`. */
export type Networks = ReturnType<typeof createNetworks>

export function createNetworks(layouts: LayoutCache) {
  return {
    /**
     * Creates a network. The same definition again changes nothing; a different one under
     * the same id is a Conflict.
     */
    async createNetwork(network: string, spec: NetworkSpec): Promise<void> {
      checkId('network', network)
      const definition = normalizeNetwork(spec)
      compile(network, definition)
      await commit(layouts, network, (current) => {
        if (current === undefined) return { definition }
        if (JSON.stringify(current.definition) === JSON.stringify(definition)) return undefined
        throw new Conflict(`network ${network} already exists with a different definition`)
      })
    },

    /**
     * Creates the network, or changes its definition to `spec` (a group whose extra
     * subnets changed): what it already holds stays held. Refused (Conflict, naming the
     * holder) while an address is held where the new definition drops a subnet or
     * reserves it (a new gateway), except by the owners `options.releaseDropped` names,
     * whose addresses in dropped subnets are given back in the same step and returned.
     * The same definition again changes nothing.
     *
     * @example
     * // network6 moved: every `ipv6/<host>` address in the old /64 is given back
     * await ipam.defineNetwork('rg-blue', next, { releaseDropped: { ownerPrefix: 'ipv6/' } })
     * // [{ owner: 'ipv6/h1', ip: 'fd00:10::800:ff:fe00:1' }]
     */
    async defineNetwork(
      network: string,
      spec: NetworkSpec,
      options: DefineOptions = {},
    ): Promise<Released[]> {
      checkId('network', network)
      const definition = normalizeNetwork(spec)
      const next = compile(network, definition)
      const { releaseDropped } = options
      return commit(layouts, network, (current) => {
        if (current === undefined) return { definition }
        if (JSON.stringify(current.definition) === JSON.stringify(definition)) return undefined
        return {
          definition,
          mustBeFree: vacatedSpans(current, next),
          busy: (ip, owner) => `network ${network} cannot change: ${ip} is held by ${owner}`,
          ...(releaseDropped
            ? { release: { spans: droppedSpans(current, next), ...releaseDropped } }
            : {}),
        }
      })
    },

    /** Deletes a network; refused (Conflict) while addresses are held, unless forced. */
    async deleteNetwork(network: string, options: { force?: boolean } = {}): Promise<void> {
      await commit(layouts, network, (current) =>
        current === undefined
          ? undefined
          : {
              definition: undefined,
              force: options.force ?? false,
              busy: (ip, owner) => `network ${network} still has ${ip} held by ${owner}`,
            },
      )
    },

    /** The stored definition, or undefined when the network does not exist. */
    async getNetwork(network: string): Promise<NetworkDefinition | undefined> {
      return (await layouts.read(network)).layout?.definition
    },

    /** Adds a subnet; refused like `createNetwork` when it breaks a rule (overlap, DHCP). */
    async addSubnet(network: string, spec: SubnetSpec): Promise<void> {
      const subnet = normalizeSubnet(spec)
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        return { definition: { subnets: [...layout.definition.subnets, subnet] } }
      })
    },

    /** Removes a subnet (by CIDR or name); refused while it holds addresses. */
    async removeSubnet(network: string, ident: string): Promise<void> {
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        const subnet = findSubnet(layout, ident)
        if (subnet === undefined) throw new NotFound('subnet', `${network}/${ident}`)
        return {
          definition: { subnets: layout.definition.subnets.filter((s) => s !== subnet.definition) },
          mustBeFree: [subnet.cidr],
          busy: (ip, owner) => `subnet ${subnet.cidr.text} still has ${ip} held by ${owner}`,
        }
      })
    },

    /**
     * Changes a subnet's CIDR, gateway, DHCP flag or name. Growing checks for overlaps;
     * shrinking is refused while the trimmed part holds addresses, pools or external ranges.
     */
    async modifySubnet(network: string, ident: string, change: SubnetChange): Promise<void> {
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        const subnet = findSubnet(layout, ident)
        if (subnet === undefined) throw new NotFound('subnet', `${network}/${ident}`)
        const { gateway: _gateway, ...rest } = subnet.definition
        const next = normalizeSubnet({
          ...rest,
          ...(change.cidr === undefined ? {} : { cidr: change.cidr }),
          ...(change.dhcp === undefined ? {} : { dhcp: change.dhcp }),
          ...(change.name === undefined ? {} : { name: change.name }),
          ...(change.gateway === null
            ? {}
            : change.gateway !== undefined
              ? { gateway: change.gateway }
              : subnet.definition.gateway === undefined
                ? {}
                : { gateway: subnet.definition.gateway }),
        })
        const cidr = parseCidr(next.cidr)
        if (cidr.version !== subnet.cidr.version) {
          throw new InvalidRequest(`subnet ${subnet.cidr.text} cannot change IP version`)
        }
        const trimmed = subtract(subnet.cidr, cidr)
        for (const part of trimmed) {
          for (const pool of subnet.pools) {
            if (overlaps(pool.span, part)) {
              throw new Conflict(
                `shrinking ${subnet.cidr.text} to ${cidr.text} would cut pool ${pool.label}`,
              )
            }
          }
          for (const ext of subnet.external) {
            if (overlaps(ext, part)) {
              throw new Conflict(
                `shrinking ${subnet.cidr.text} to ${cidr.text} would cut external range ${formatSpan(ext)}`,
              )
            }
          }
        }
        return {
          definition: {
            subnets: layout.definition.subnets.map((s) => (s === subnet.definition ? next : s)),
          },
          mustBeFree: trimmed,
          busy: (ip, owner) =>
            `shrinking ${subnet.cidr.text} to ${cidr.text} would cut ${ip}, held by ${owner}`,
        }
      })
    },

    /**
     * Adds a pool to the subnet holding its range; addresses already held inside it are
     * marked taken. Pools of one network never overlap.
     */
    async addPool(network: string, pool: PoolSpec): Promise<void> {
      const p = parseSpec(PoolSchema, pool, 'pool')
      const r = normalizeRange({ start: p.start, end: p.end })
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        const subnet = holdingSubnet(network, layout, r)
        return replaceSubnet(layout, subnet, {
          ...subnet.definition,
          pools: [
            ...subnet.definition.pools,
            { ...r, ...(p.name === undefined ? {} : { name: p.name }) },
          ],
        })
      })
    },

    /**
     * Removes a range from the pools (splitting a pool that holds it in the middle; both
     * parts keep the name), or every pool with a name. Held addresses stay held.
     */
    async removePool(network: string, which: RangeSpec | { name: string }): Promise<void> {
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        if ('name' in which) {
          if (!layout.pools.some((p) => p.name === which.name))
            throw new NotFound('pool', `${network}/${which.name}`)
          return {
            definition: {
              subnets: layout.definition.subnets.map((s) => ({
                ...s,
                pools: s.pools.filter((p) => p.name !== which.name),
              })),
            },
          }
        }
        const r = normalizeRange(which)
        const cut = parseSpan(r.start, r.end)
        if (!layout.pools.some((p) => overlaps(p.span, cut)))
          throw new NotFound('pool', `${network}/${r.start}-${r.end}`)
        return {
          definition: {
            subnets: layout.subnets.map((s) => ({
              ...s.definition,
              pools: s.pools.flatMap((p) =>
                subtract(p.span, cut).map((part) => ({
                  start: formatIp({ version: part.version, value: part.first }),
                  end: formatIp({ version: part.version, value: part.last }),
                  ...(p.name === undefined ? {} : { name: p.name }),
                })),
              ),
            })),
          },
        }
      })
    },

    /** Reserves a range externally: never handed out automatically, explicitly only by force. */
    async addExternal(network: string, range: RangeSpec): Promise<void> {
      const r = normalizeRange(range)
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        const subnet = holdingSubnet(network, layout, r)
        return replaceSubnet(layout, subnet, {
          ...subnet.definition,
          external: [...subnet.definition.external, r],
        })
      })
    },

    /** Removes a range from the external reservations, splitting ranges that hold it. */
    async removeExternal(network: string, range: RangeSpec): Promise<void> {
      const r = normalizeRange(range)
      const cut = parseSpan(r.start, r.end)
      await commit(layouts, network, (current) => {
        const layout = required(network, current)
        if (!layout.subnets.some((s) => s.external.some((e) => overlaps(e, cut)))) return undefined
        return {
          definition: {
            subnets: layout.subnets.map((s) => ({
              ...s.definition,
              external: s.external.flatMap((e) =>
                subtract(e, cut).map((part) => ({
                  start: formatIp({ version: part.version, value: part.first }),
                  end: formatIp({ version: part.version, value: part.last }),
                })),
              ),
            })),
          },
        }
      })
    },
  }
}

/**
 * Reads the current definition, lets `change` compute the next one (or undefined for
 * no change), and commits it with the bitmaps rebuilt, retrying if another writer got
 * there first. Returns the addresses the change gave back (`Plan.release`).
 */
async function commit(
  layouts: LayoutCache,
  network: string,
  change: (current: Layout | undefined) => Plan | undefined,
): Promise<Released[]> {
  const k = layouts.keys(network)
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await layouts.read(network, true)
    const plan = change(current.layout)
    if (plan === undefined) return []
    const next = plan.definition === undefined ? undefined : compile(network, plan.definition)
    const keys = [k.meta, k.owners, k.holders]
    for (const pool of current.layout?.pools ?? []) keys.push(...k.pool(pool.index).all)
    const args: (string | number | Buffer)[] = [
      current.version,
      next === undefined ? '' : JSON.stringify(next.definition),
      keys.length - 3,
      next?.pools.length ?? 0,
      plan.mustBeFree?.length ?? 0,
      plan.force ? '1' : '0',
      plan.release?.spans.length ?? 0,
      plan.release?.ownerPrefix ?? '',
    ]
    for (const subnet of next?.subnets ?? []) {
      for (const pool of subnet.pools) {
        const p = k.pool(pool.index)
        keys.push(p.excl, p.busy)
        args.push(pool.startHex, pool.endHex, exclusionBitmap(subnet, pool))
      }
    }
    for (const span of [...(plan.mustBeFree ?? []), ...(plan.release?.spans ?? [])]) {
      args.push(
        toHex({ version: span.version, value: span.first }),
        toHex({ version: span.version, value: span.last }),
      )
    }
    const [status, detail = '', hex = '', ...rest] = tuple(
      await scripts.commitNetwork.run(layouts.redis, keys, args),
    )
    if (status === 'ok') {
      layouts.remember(network, detail, next)
      return releasedOf([hex, ...rest])
    }
    if (status === 'busy') {
      const ip = formatIp(fromHex(hex))
      throw new Conflict(plan.busy?.(ip, detail) ?? `${ip} is held by ${detail}`, detail)
    }
  }
  throw new Conflict(`network ${network} kept changing; try again`, undefined, {
    retryable: true,
  })
}

/** `[owner, addressHex, owner, addressHex, …]` as the script answers it. */
function releasedOf(pairs: readonly string[]): Released[] {
  const out: Released[] = []
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    out.push({ owner: pairs[i] ?? '', ip: formatIp(fromHex(pairs[i + 1] ?? '')) })
  }
  return out
}

function required(network: string, layout: Layout | undefined): Layout {
  if (layout === undefined) throw new NotFound('network', network)
  return layout
}

function holdingSubnet(network: string, layout: Layout, r: RangeSpec): SubnetLayout {
  const span = parseSpan(r.start, r.end)
  const subnet = subnetHolding(layout, span)
  if (subnet === undefined) throw new NotInSubnet(network, formatSpan(span))
  return subnet
}

function replaceSubnet(layout: Layout, subnet: SubnetLayout, next: SubnetDefinition): Plan {
  return {
    definition: {
      subnets: layout.definition.subnets.map((s) => (s === subnet.definition ? next : s)),
    },
  }
}

/**
 * Addresses of a network handed to owners: allocate, release, look up, list, and the map
 * of every pool. Allocation is keyed by owner: asking again for the same owner returns
 * the same address, so a retried handler never takes a second one. Each script is given
 * the version of the cached layout it was computed from and refuses a stale one.
 */
import { containsAddress, formatIp, fromHex, parseIp, toHex } from './address.ts'
import type { Layout, PoolLayout, PoolSpec, RangeSpec } from './definition.ts'
import { AddressInUse, Conflict, NotFound, NotInSubnet, PoolExhausted } from './errors.ts'
import { checkId } from './keys.ts'
import { type LayoutCache, MAX_ATTEMPTS } from './layout-cache.ts'
import { scripts, tuple } from './scripts.ts'

export interface Allocation {
  ip: string
  /** CIDR of the subnet the address lies in. */
  subnet: string
  /** The pool it came from: its name, or `start-end` when unnamed. Absent outside pools. */
  pool?: string
}

export interface AllocateOptions {
  /** This exact address (it must lie in a subnet of the network). */
  ip?: string
  /** The first free address of the pool(s) with this name. */
  pool?: string
  /** Only consider subnets of this IP version. */
  version?: 4 | 6
  /** Hand out an externally reserved address anyway (only with `ip`). */
  force?: boolean
}

export interface NetworkMap {
  network: string
  subnets: {
    cidr: string
    name?: string
    gateway?: string
    dhcp: boolean
    /** `map`: one character per address, `X` taken (held or excluded), `.` free. */
    pools: { start: string; end: string; name?: string; map: string }[]
    external: RangeSpec[]
  }[]
}

/** One try at an allocation, against the layout at `version`. */
interface Attempt {
  readonly layouts: LayoutCache
  readonly network: string
  readonly owner: string
  readonly version: string
  readonly layout: Layout
}

/** Pools an allocation may draw from, with their script keys and arguments. */
interface Candidates {
  readonly pools: readonly PoolLayout[]
  readonly keys: readonly string[]
  readonly args: readonly (string | number)[]
}

/** Allocation, release, lookup and the map of `Ipam`. */
export type Allocations = ReturnType<typeof createAllocations>

export function createAllocations(layouts: LayoutCache) {
  const candidates = candidatePools(layouts)
  return {
    /**
     * Gives `owner` an address: `ip` exactly, or the first free address of the pool(s)
     * named `pool`, or the first free address of the first pool of the first subnet, then
     * the next. An owner holds at most one address per network; asking again returns it.
     *
     * Throws PoolExhausted, AddressInUse (naming the holder), NotInSubnet, NotFound (no such
     * network or pool) and Conflict (the address is reserved, or the owner holds another).
     */
    async allocate(
      network: string,
      owner: string,
      options: AllocateOptions = {},
    ): Promise<Allocation> {
      checkId('owner', owner)
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const { version, layout } = await layouts.require(network)
        const at = { layouts, network, owner, version, layout }
        const reply =
          options.ip === undefined
            ? await allocateFromPool(at, candidates(network, layout, options), options)
            : await allocateAddress(at, options.ip, options.force ?? false)
        if (reply !== undefined) return reply
        layouts.forget(network)
      }
      throw new Conflict(`network ${network} kept changing during allocation`, undefined, {
        retryable: true,
      })
    },

    /** Takes back the owner's address; returns it, or undefined when it held none. */
    async release(network: string, owner: string): Promise<string | undefined> {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const snapshot = await layouts.read(network)
        const layout = snapshot.layout
        const k = layouts.keys(network)
        const keys = [k.meta, k.owners, k.holders]
        const args: (string | number)[] = [snapshot.version, owner, layout?.pools.length ?? 0]
        for (const pool of layout?.pools ?? []) {
          const p = k.pool(pool.index)
          keys.push(p.excl, p.busy)
          args.push(pool.startHex, pool.endHex)
        }
        const [status, hex = ''] = tuple(
          await scripts.releaseAddress.run(layouts.redis, keys, args),
        )
        if (status === 'ok') return formatIp(fromHex(hex))
        if (status === 'none') return undefined
        layouts.forget(network)
      }
      throw new Conflict(`network ${network} kept changing during release`, undefined, {
        retryable: true,
      })
    },

    /** The owner's address, or undefined. */
    async lookup(network: string, owner: string): Promise<Allocation | undefined> {
      const hex = await layouts.redis.hget(layouts.keys(network).owners, owner)
      if (hex === null) return undefined
      const { layout } = await layouts.read(network, true)
      return layout === undefined ? undefined : describe(layout, hex)
    },

    /** Every held address of the network, in address order. */
    async allocations(network: string): Promise<{ owner: string; ip: string }[]> {
      const owners = await layouts.redis.hgetall(layouts.keys(network).owners)
      return Object.entries(owners)
        .sort(([, a], [, b]) => a.length - b.length || (a < b ? -1 : 1))
        .map(([owner, hex]) => ({ owner, ip: formatIp(fromHex(hex)) }))
    },

    /** How many addresses the network's owners hold. */
    async allocatedCount(network: string): Promise<number> {
      return layouts.redis.hlen(layouts.keys(network).owners)
    },

    /** Subnets with their pools drawn as `X` (taken) / `.` (free), as Ganeti's `map`. */
    async map(network: string): Promise<NetworkMap> {
      const k = layouts.keys(network)
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const { version, layout } = await layouts.read(network, true)
        if (layout === undefined) throw new NotFound('network', network)
        const pipeline = layouts.redis.multi().hget(k.meta, 'version')
        for (const pool of layout.pools) pipeline.getBuffer(k.pool(pool.index).busy)
        const replies = (await pipeline.exec()) ?? []
        if (String(replies[0]?.[1]) !== version) continue
        return {
          network,
          subnets: layout.subnets.map((s) => ({
            cidr: s.definition.cidr,
            ...(s.definition.name === undefined ? {} : { name: s.definition.name }),
            ...(s.definition.gateway === undefined ? {} : { gateway: s.definition.gateway }),
            dhcp: s.definition.dhcp,
            pools: s.pools.map((p) => {
              const bitmap = replies[p.index + 1]?.[1]
              return {
                ...poolRange(p),
                map: drawBitmap(Buffer.isBuffer(bitmap) ? bitmap : Buffer.alloc(0), p.size),
              }
            }),
            external: s.definition.external,
          })),
        }
      }
      throw new Conflict(`network ${network} kept changing while being read`, undefined, {
        retryable: true,
      })
    },
  }
}

/** The first free address of the candidate pools; undefined when the layout was stale. */
async function allocateFromPool(
  at: Attempt,
  from: Candidates,
  options: AllocateOptions,
): Promise<Allocation | undefined> {
  const { layouts, network, owner, version, layout } = at
  const args = [version, owner, ...from.args]
  const [status, hex = ''] = tuple(
    await scripts.allocateFromPool.run(layouts.redis, from.keys, args),
  )
  switch (status) {
    case 'ok':
      return describe(layout, hex)
    case 'held': {
      const allocation = describe(layout, hex)
      const narrowed = options.pool !== undefined || options.version !== undefined
      if (narrowed && !from.pools.some((p) => containsAddress(p.span, fromHex(hex)))) {
        throw new Conflict(
          `${owner} already holds ${allocation.ip} in network ${network}, outside the pools asked for`,
          owner,
        )
      }
      return allocation
    }
    case 'stale':
      return undefined
    default:
      throw new PoolExhausted(
        network,
        options.pool ?? (options.version === undefined ? '*' : `*v${options.version}`),
      )
  }
}

/** One explicit address; undefined when the layout was stale. */
async function allocateAddress(
  at: Attempt,
  ipText: string,
  force: boolean,
): Promise<Allocation | undefined> {
  const { layouts, network, owner, version, layout } = at
  const address = parseIp(ipText)
  const ip = formatIp(address)
  const subnet = layout.subnets.find((s) => containsAddress(s.cidr, address))
  if (subnet === undefined) throw new NotInSubnet(network, ip)
  if (subnet.reserved.includes(address.value)) {
    throw new Conflict(
      `${ip} is the network, broadcast or gateway address of ${subnet.cidr.text}; it is never handed out`,
    )
  }
  if (!force && subnet.external.some((e) => containsAddress(e, address))) {
    throw new Conflict(`${ip} is externally reserved in network ${network}; pass force to take it`)
  }
  const pool = subnet.pools.find((p) => containsAddress(p.span, address))
  const k = layouts.keys(network)
  const keys = [k.meta, k.owners, k.holders]
  let offset = -1
  if (pool !== undefined) {
    keys.push(k.pool(pool.index).busy)
    offset = Number(address.value - pool.span.first)
  }
  const [status, detail = ''] = tuple(
    await scripts.allocateAddress.run(layouts.redis, keys, [
      version,
      owner,
      toHex(address),
      offset,
    ]),
  )
  switch (status) {
    case 'ok':
      return describe(layout, detail)
    case 'held':
      throw new Conflict(
        `${owner} already holds ${formatIp(fromHex(detail))} in network ${network}, not ${ip}`,
        owner,
      )
    case 'taken':
      throw new AddressInUse(network, ip, detail)
    default:
      return undefined
  }
}

/**
 * Picks the pools an allocation may draw from (all, one name, one IP version) and builds
 * their script keys and arguments, once per layout and choice: the hot path of `allocate`.
 */
function candidatePools(layouts: LayoutCache) {
  const memo = new WeakMap<Layout, Map<string, Candidates>>()
  return function candidates(
    network: string,
    layout: Layout,
    options: AllocateOptions,
  ): Candidates {
    let known = memo.get(layout)
    if (known === undefined) {
      known = new Map()
      memo.set(layout, known)
    }
    const id = `${options.version ?? ''}|${options.pool ?? ''}`
    const entry = known.get(id)
    if (entry !== undefined) return entry
    let pools = layout.pools
    if (options.pool !== undefined) {
      pools = pools.filter((p) => p.name === options.pool)
      if (pools.length === 0) throw new NotFound('pool', `${network}/${options.pool}`)
    }
    if (options.version !== undefined) {
      pools = pools.filter((p) => p.span.version === options.version)
    }
    const k = layouts.keys(network)
    const keys = [k.meta, k.owners, k.holders]
    const args: (string | number)[] = []
    for (const pool of pools) {
      keys.push(k.pool(pool.index).busy)
      args.push(pool.startHex, pool.size)
    }
    const built = { pools, keys, args }
    known.set(id, built)
    return built
  }
}

function describe(layout: Layout, hex: string): Allocation {
  const address = fromHex(hex)
  const ip = formatIp(address)
  const subnet = layout.subnets.find((s) => containsAddress(s.cidr, address))
  const pool = subnet?.pools.find((p) => containsAddress(p.span, address))
  return {
    ip,
    subnet: subnet?.cidr.text ?? '',
    ...(pool === undefined ? {} : { pool: pool.label }),
  }
}

function poolRange(p: PoolLayout): PoolSpec {
  return {
    start: formatIp({ version: p.span.version, value: p.span.first }),
    end: formatIp({ version: p.span.version, value: p.span.last }),
    ...(p.name === undefined ? {} : { name: p.name }),
  }
}

function drawBitmap(bitmap: Buffer, size: number): string {
  let out = ''
  for (let bit = 0; bit < size; bit++) {
    const byte = bitmap[bit >> 3] ?? 0
    out += byte & (0x80 >> (bit & 7)) ? 'X' : '.'
  }
  return out
}

/**
 * IP address management for group networks (seed 004) and the operator's public IPs,
 * kept in Redis.
 *
 * Every multi-key change is one Lua script (`./lua/`), so concurrent workers never hand
 * out one address twice. Allocation is keyed by owner: asking again for the same owner
 * returns the same address, so a retried handler never takes a second one.
 *
 * @example
 * const ipam = new Ipam(redis, { prefix: 'hz:ipam:' })
 * await ipam.createNetwork('rg-blue', {
 *   subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1',
 *     pools: [{ start: '10.0.0.1', end: '10.0.0.254' }],
 *     external: [{ start: '10.0.0.254', end: '10.0.0.254' }] }],
 * })
 * const { ip } = await ipam.allocate('rg-blue', 'host-7') // 10.0.0.2, and again on retry
 */
import type { Redis } from 'ioredis'
import {
  containsAddress,
  formatIp,
  formatSpan,
  fromHex,
  overlaps,
  parseCidr,
  parseIp,
  parseSpan,
  type Span,
  subtract,
  toHex,
} from './address.ts'
import {
  compile,
  exclusionBitmap,
  findSubnet,
  type Layout,
  type NetworkDefinition,
  type NetworkSpec,
  normalizeNetwork,
  normalizeRange,
  normalizeSubnet,
  type PoolLayout,
  PoolSchema,
  type PoolSpec,
  parseSpec,
  type RangeSpec,
  type SubnetDefinition,
  type SubnetLayout,
  type SubnetSpec,
  subnetHolding,
} from './definition.ts'
import {
  AddressInUse,
  Conflict,
  InvalidRequest,
  NotFound,
  NotInSubnet,
  Overlap,
  PoolExhausted,
} from './errors.ts'
import { scripts, tuple } from './scripts.ts'

export type { NetworkDefinition, NetworkSpec, PoolSpec, RangeSpec, SubnetDefinition, SubnetSpec }
export { AddressInUse, Conflict, InvalidRequest, NotFound, NotInSubnet, Overlap, PoolExhausted }

export interface IpamOptions {
  /**
   * Prepended to every key. Keys of one network share the hash tag `{net:<id>}`, so a
   * network lives in one Redis Cluster slot. Default `hz:ipam:`.
   */
  prefix?: string
}

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

export interface SubnetChange {
  cidr?: string
  /** `null` removes the gateway. */
  gateway?: string | null
  dhcp?: boolean
  name?: string
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

export interface PublicIpStatus {
  ip: string
  allocated: boolean
  allocatedTo?: string
}

const MAX_ATTEMPTS = 20
const ID = /^[^{}\s]+$/

interface Snapshot {
  version: string
  layout?: Layout
}

interface Plan {
  /** The new definition; `undefined` deletes the network. */
  definition: NetworkDefinition | undefined
  /** Ranges that must hold no address for the change to go through. */
  mustBeFree?: Span[]
  force?: boolean
  busy?: (ip: string, owner: string) => string
}

export class Ipam {
  readonly #redis: Redis
  readonly #prefix: string
  readonly #cache = new Map<string, { version: string; layout: Layout }>()
  readonly #candidateMemo = new WeakMap<
    Layout,
    Map<
      string,
      { candidates: readonly PoolLayout[]; keys: string[]; poolArgs: (string | number)[] }
    >
  >()

  constructor(redis: Redis, options: IpamOptions = {}) {
    this.#redis = redis
    this.#prefix = options.prefix ?? 'hz:ipam:'
  }

  /** Loads every script into the server now, instead of on first use. */
  async load(): Promise<void> {
    for (const script of Object.values(scripts)) await this.#redis.script('LOAD', script.source)
  }

  // ── networks ────────────────────────────────────────────────────────────────

  /**
   * Creates a network. The same definition again changes nothing; a different one under
   * the same id is a Conflict.
   */
  async createNetwork(network: string, spec: NetworkSpec): Promise<void> {
    checkId('network', network)
    const definition = normalizeNetwork(spec)
    compile(network, definition)
    await this.#mutate(network, (current) => {
      if (current === undefined) return { definition }
      if (JSON.stringify(current.definition) === JSON.stringify(definition)) return undefined
      throw new Conflict(`network ${network} already exists with a different definition`)
    })
  }

  /** Deletes a network; refused (Conflict) while addresses are held, unless forced. */
  async deleteNetwork(network: string, options: { force?: boolean } = {}): Promise<void> {
    await this.#mutate(network, (current) =>
      current === undefined
        ? undefined
        : {
            definition: undefined,
            force: options.force ?? false,
            busy: (ip, owner) => `network ${network} still has ${ip} held by ${owner}`,
          },
    )
  }

  /** The stored definition, or undefined when the network does not exist. */
  async getNetwork(network: string): Promise<NetworkDefinition | undefined> {
    return (await this.#read(network)).layout?.definition
  }

  async addSubnet(network: string, spec: SubnetSpec): Promise<void> {
    const subnet = normalizeSubnet(spec)
    await this.#mutate(network, (current) => {
      const layout = required(network, current)
      return { definition: { subnets: [...layout.definition.subnets, subnet] } }
    })
  }

  /** Removes a subnet (by CIDR or name); refused while it holds addresses. */
  async removeSubnet(network: string, ident: string): Promise<void> {
    await this.#mutate(network, (current) => {
      const layout = required(network, current)
      const subnet = findSubnet(layout, ident)
      if (subnet === undefined) throw new NotFound('subnet', `${network}/${ident}`)
      return {
        definition: { subnets: layout.definition.subnets.filter((s) => s !== subnet.definition) },
        mustBeFree: [subnet.cidr],
        busy: (ip, owner) => `subnet ${subnet.cidr.text} still has ${ip} held by ${owner}`,
      }
    })
  }

  /**
   * Changes a subnet's CIDR, gateway, DHCP flag or name. Growing checks for overlaps;
   * shrinking is refused while the trimmed part holds addresses, pools or external ranges.
   */
  async modifySubnet(network: string, ident: string, change: SubnetChange): Promise<void> {
    await this.#mutate(network, (current) => {
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
  }

  /**
   * Adds a pool to the subnet holding its range; addresses already held inside it are
   * marked taken. Pools of one network never overlap.
   */
  async addPool(network: string, pool: PoolSpec): Promise<void> {
    const p = parseSpec(PoolSchema, pool, 'pool')
    const r = normalizeRange({ start: p.start, end: p.end })
    await this.#mutate(network, (current) => {
      const layout = required(network, current)
      const subnet = holdingSubnet(network, layout, r)
      return this.#replaceSubnet(layout, subnet, {
        ...subnet.definition,
        pools: [
          ...subnet.definition.pools,
          { ...r, ...(p.name === undefined ? {} : { name: p.name }) },
        ],
      })
    })
  }

  /**
   * Removes a range from the pools (splitting a pool that holds it in the middle; both
   * parts keep the name), or every pool with a name. Held addresses stay held.
   */
  async removePool(network: string, which: RangeSpec | { name: string }): Promise<void> {
    await this.#mutate(network, (current) => {
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
  }

  /** Reserves a range externally: never handed out automatically, explicitly only by force. */
  async addExternal(network: string, range: RangeSpec): Promise<void> {
    const r = normalizeRange(range)
    await this.#mutate(network, (current) => {
      const layout = required(network, current)
      const subnet = holdingSubnet(network, layout, r)
      return this.#replaceSubnet(layout, subnet, {
        ...subnet.definition,
        external: [...subnet.definition.external, r],
      })
    })
  }

  /** Removes a range from the external reservations, splitting ranges that hold it. */
  async removeExternal(network: string, range: RangeSpec): Promise<void> {
    const r = normalizeRange(range)
    const cut = parseSpan(r.start, r.end)
    await this.#mutate(network, (current) => {
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
  }

  // ── addresses ───────────────────────────────────────────────────────────────

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
      const { version, layout } = await this.#cached(network)
      const reply =
        options.ip === undefined
          ? await this.#allocateFromPool(network, owner, version, layout, options)
          : await this.#allocateAddress(
              network,
              owner,
              version,
              layout,
              options.ip,
              options.force ?? false,
            )
      if (reply !== undefined) return reply
      this.#cache.delete(network)
    }
    throw new Conflict(`network ${network} kept changing during allocation`, undefined, {
      retryable: true,
    })
  }

  async #allocateFromPool(
    network: string,
    owner: string,
    version: string,
    layout: Layout,
    options: AllocateOptions,
  ): Promise<Allocation | undefined> {
    const { candidates, keys, poolArgs } = this.#candidates(network, layout, options)
    const args = [version, owner, candidates.length, ...poolArgs]
    const [status, hex = ''] = tuple(await scripts.allocateFromPool.run(this.#redis, keys, args))
    switch (status) {
      case 'ok':
        return describe(layout, hex)
      case 'held': {
        const allocation = describe(layout, hex)
        const narrowed = options.pool !== undefined || options.version !== undefined
        if (narrowed && !candidates.some((p) => containsAddress(p.span, fromHex(hex)))) {
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

  async #allocateAddress(
    network: string,
    owner: string,
    version: string,
    layout: Layout,
    ipText: string,
    force: boolean,
  ): Promise<Allocation | undefined> {
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
      throw new Conflict(
        `${ip} is externally reserved in network ${network}; pass force to take it`,
      )
    }
    const pool = subnet.pools.find((p) => containsAddress(p.span, address))
    const k = this.#networkKeys(network)
    const keys = [k.meta, k.owners, k.holders]
    let offset = -1
    if (pool !== undefined) {
      keys.push(k.pool(pool.index).res, k.pool(pool.index).busy)
      offset = Number(address.value - pool.span.first)
    }
    const [status, detail = ''] = tuple(
      await scripts.allocateAddress.run(this.#redis, keys, [
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

  /** Takes back the owner's address; returns it, or undefined when it held none. */
  async release(network: string, owner: string): Promise<string | undefined> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const snapshot = await this.#read(network)
      const layout = snapshot.layout
      const k = this.#networkKeys(network)
      const keys = [k.meta, k.owners, k.holders]
      const args: (string | number)[] = [snapshot.version, owner, layout?.pools.length ?? 0]
      for (const pool of layout?.pools ?? []) {
        const p = k.pool(pool.index)
        keys.push(p.res, p.excl, p.busy)
        args.push(pool.startHex, pool.endHex)
      }
      const [status, hex = ''] = tuple(await scripts.releaseAddress.run(this.#redis, keys, args))
      if (status === 'ok') return formatIp(fromHex(hex))
      if (status === 'none') return undefined
      this.#cache.delete(network)
    }
    throw new Conflict(`network ${network} kept changing during release`, undefined, {
      retryable: true,
    })
  }

  /** The owner's address, or undefined. */
  async lookup(network: string, owner: string): Promise<Allocation | undefined> {
    const hex = await this.#redis.hget(this.#networkKeys(network).owners, owner)
    if (hex === null) return undefined
    const { layout } = await this.#read(network, true)
    return layout === undefined ? undefined : describe(layout, hex)
  }

  /** Every held address of the network, in address order. */
  async allocations(network: string): Promise<{ owner: string; ip: string }[]> {
    const owners = await this.#redis.hgetall(this.#networkKeys(network).owners)
    return Object.entries(owners)
      .sort(([, a], [, b]) => a.length - b.length || (a < b ? -1 : 1))
      .map(([owner, hex]) => ({ owner, ip: formatIp(fromHex(hex)) }))
  }

  async allocatedCount(network: string): Promise<number> {
    return this.#redis.hlen(this.#networkKeys(network).owners)
  }

  /** Subnets with their pools drawn as `X` (taken) / `.` (free), seed 004's `map`. */
  async map(network: string): Promise<NetworkMap> {
    const k = this.#networkKeys(network)
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { version, layout } = await this.#read(network, true)
      if (layout === undefined) throw new NotFound('network', network)
      const pipeline = this.#redis.multi().hget(k.meta, 'version')
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
  }

  // ── public IPs ──────────────────────────────────────────────────────────────

  /** Adds an operator-owned public IP to the pool; registering it again changes nothing. */
  async registerPublicIp(ip: string): Promise<void> {
    const k = this.#publicKeys()
    await scripts.publicIpRegister.run(this.#redis, [k.registry, k.free], [toHex(parseIp(ip))])
  }

  /** Removes a public IP; a Conflict (naming the holder) while it is allocated. */
  async unregisterPublicIp(ip: string): Promise<void> {
    const k = this.#publicKeys()
    const address = parseIp(ip)
    const [status, owner] = tuple(
      await scripts.publicIpUnregister.run(this.#redis, [k.registry, k.free], [toHex(address)]),
    )
    if (status === 'allocated') {
      throw new Conflict(`public IP ${formatIp(address)} is allocated to ${owner}`, owner)
    }
  }

  /** Gives the owner a public IP (the same one on every call until released). */
  async allocatePublicIp(owner: string): Promise<string> {
    checkId('owner', owner)
    const k = this.#publicKeys()
    const hex = await scripts.publicIpAllocate.run(
      this.#redis,
      [k.registry, k.free, k.owners],
      [owner],
    )
    if (typeof hex !== 'string') throw new PoolExhausted('public', 'public-ips')
    return formatIp(fromHex(hex))
  }

  /** Frees the owner's public IP; returns it, or undefined when it held none. */
  async releasePublicIp(owner: string): Promise<string | undefined> {
    const k = this.#publicKeys()
    const hex = await scripts.publicIpRelease.run(
      this.#redis,
      [k.registry, k.free, k.owners],
      [owner],
    )
    return typeof hex === 'string' ? formatIp(fromHex(hex)) : undefined
  }

  async listPublicIps(): Promise<PublicIpStatus[]> {
    const registry = await this.#redis.hgetall(this.#publicKeys().registry)
    return Object.entries(registry)
      .sort(([a], [b]) => a.length - b.length || (a < b ? -1 : 1))
      .map(([hex, owner]) => ({
        ip: formatIp(fromHex(hex)),
        allocated: owner !== '',
        ...(owner === '' ? {} : { allocatedTo: owner }),
      }))
  }

  // ── internals ───────────────────────────────────────────────────────────────

  /** Pools an allocation may draw from, with their script keys and arguments (memoized). */
  #candidates(network: string, layout: Layout, options: AllocateOptions) {
    let memo = this.#candidateMemo.get(layout)
    if (memo === undefined) {
      memo = new Map()
      this.#candidateMemo.set(layout, memo)
    }
    const id = `${options.version ?? ''}|${options.pool ?? ''}`
    const known = memo.get(id)
    if (known !== undefined) return known
    let candidates = layout.pools
    if (options.pool !== undefined) {
      candidates = candidates.filter((p) => p.name === options.pool)
      if (candidates.length === 0) throw new NotFound('pool', `${network}/${options.pool}`)
    }
    if (options.version !== undefined) {
      candidates = candidates.filter((p) => p.span.version === options.version)
    }
    const k = this.#networkKeys(network)
    const keys = [k.meta, k.owners, k.holders]
    const poolArgs: (string | number)[] = []
    for (const pool of candidates) {
      keys.push(k.pool(pool.index).res, k.pool(pool.index).busy)
      poolArgs.push(pool.startHex, pool.size, pool.index)
    }
    const entry = { candidates, keys, poolArgs }
    memo.set(id, entry)
    return entry
  }

  #networkKeys(network: string) {
    checkId('network', network)
    const base = `${this.#prefix}{net:${network}}`
    return {
      meta: `${base}:meta`,
      owners: `${base}:owners`,
      holders: `${base}:holders`,
      pool: (index: number) => ({
        res: `${base}:pool:${index}:res`,
        excl: `${base}:pool:${index}:excl`,
        busy: `${base}:pool:${index}:busy`,
      }),
    }
  }

  #publicKeys() {
    const base = `${this.#prefix}{public-ip}`
    return { registry: `${base}:registry`, free: `${base}:free`, owners: `${base}:owners` }
  }

  async #read(network: string, fresh = false): Promise<Snapshot> {
    const cached = this.#cache.get(network)
    if (!fresh && cached !== undefined) return cached
    const [version = null, def = null] = await this.#redis.hmget(
      this.#networkKeys(network).meta,
      'version',
      'def',
    )
    if (version === null || def === null) {
      this.#cache.delete(network)
      return { version: version ?? '0' }
    }
    const layout = compile(network, JSON.parse(def) as NetworkDefinition)
    this.#cache.set(network, { version, layout })
    return { version, layout }
  }

  async #cached(network: string): Promise<{ version: string; layout: Layout }> {
    const { version, layout } = await this.#read(network)
    if (layout === undefined) throw new NotFound('network', network)
    return { version, layout }
  }

  #replaceSubnet(layout: Layout, subnet: SubnetLayout, next: SubnetDefinition): Plan {
    return {
      definition: {
        subnets: layout.definition.subnets.map((s) => (s === subnet.definition ? next : s)),
      },
    }
  }

  /**
   * Reads the current definition, lets `change` compute the next one (or undefined for
   * no change), and commits it with the bitmaps rebuilt, retrying if another writer got
   * there first.
   */
  async #mutate(
    network: string,
    change: (current: Layout | undefined) => Plan | undefined,
  ): Promise<void> {
    const k = this.#networkKeys(network)
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.#read(network, true)
      const plan = change(current.layout)
      if (plan === undefined) return
      const next = plan.definition === undefined ? undefined : compile(network, plan.definition)
      const keys = [k.meta, k.owners, k.holders]
      for (const pool of current.layout?.pools ?? []) {
        const p = k.pool(pool.index)
        keys.push(p.res, p.excl, p.busy)
      }
      const args: (string | number | Buffer)[] = [
        current.version,
        next === undefined ? '' : JSON.stringify(next.definition),
        keys.length - 3,
        next?.pools.length ?? 0,
        plan.mustBeFree?.length ?? 0,
        plan.force ? '1' : '0',
      ]
      for (const subnet of next?.subnets ?? []) {
        for (const pool of subnet.pools) {
          const p = k.pool(pool.index)
          keys.push(p.res, p.excl, p.busy)
          args.push(pool.startHex, pool.endHex, exclusionBitmap(subnet, pool))
        }
      }
      for (const span of plan.mustBeFree ?? []) {
        args.push(
          toHex({ version: span.version, value: span.first }),
          toHex({ version: span.version, value: span.last }),
        )
      }
      const [status, detail = '', hex = ''] = tuple(
        await scripts.commitNetwork.run(this.#redis, keys, args),
      )
      if (status === 'ok') {
        if (next === undefined) this.#cache.delete(network)
        else this.#cache.set(network, { version: detail, layout: next })
        return
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
}

function checkId(kind: string, id: string): void {
  if (!ID.test(id))
    throw new InvalidRequest(`bad ${kind} id ${JSON.stringify(id)}: no braces or spaces`)
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

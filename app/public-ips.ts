/**
 * A request on the operator's public IP pool, decided once: `prepare` validates the
 * address (IPv4 or IPv6, any spelling of it the same one, kept canonical) and reads its
 * pool entry once; `apply` registers or unregisters it; `plan` answers a dry run from the
 * same prepared request. Registering is idempotent; unregistering is refused (404) for an
 * address not in the pool and (409) for one allocated, or held for a pending isolation.
 */
import { Conflict, type Ipam, type PublicIpStatus as PoolEntry } from '../lib/ipam/index.ts'
import { type PublicIp, PublicIpSpec } from '../lib/model/objects.ts'
import type { ChangePlan } from '../lib/model/plans.ts'
import { parseIsolationHoldOwner } from '../lib/state/isolation-holds.ts'
import { StoreConflict } from '../lib/state/store.ts'
import { NotFoundError, validate } from './errors.ts'

export type PoolChange = 'register' | 'unregister'

/** A pool request that passed its checks: the canonical address and its entry, if any. */
export interface PreparedPublicIp {
  readonly address: string
  readonly change: PoolChange
  readonly status: PublicIp | undefined
}

/** A plan that changes the pool only. */
function poolOnly(notes: string[]): ChangePlan {
  return {
    dryRun: true,
    nb: { central: null, insert: [], update: [], delete: [] },
    frr: { announce: [], withdraw: [] },
    agentJobs: [],
    addresses: { allocate: [], release: [] },
    notes,
  }
}

/**
 * A pool entry as the API answers it: one a host has names the host (`allocatedTo`); one
 * a DPU's pending isolation holds (`isolation-holds.ts`) names that DPU and the host it
 * may still announce it for (`heldUntilIsolatedBy`), never the hold's internal owner. Pure.
 *
 * @example publicIpOf({ ip: '203.0.113.5', allocated: true, allocatedTo: 'dpu:dpu-1:isolates:h1:4' })
 * // { ip: '203.0.113.5', allocated: true, heldUntilIsolatedBy: { dpu: 'dpu-1', host: 'h1' } }
 */
export function publicIpOf(entry: PoolEntry): PublicIp {
  const { ip, allocated, allocatedTo } = entry
  const hold = allocatedTo === undefined ? undefined : parseIsolationHoldOwner(allocatedTo)
  if (hold) return { ip, allocated, heldUntilIsolatedBy: { dpu: hold.dpuId, host: hold.host } }
  return { ip, allocated, ...(allocatedTo === undefined ? {} : { allocatedTo }) }
}

/** Who or what an address is taken by, as a refusal names it. Pure. */
function takenBy(status: PublicIp): string {
  const hold = status.heldUntilIsolatedBy
  return hold
    ? `held until DPU ${hold.dpu} confirms isolation of host ${hold.host}`
    : `allocated to ${status.allocatedTo}`
}

/** A public IP as the pool keys it: validated (IPv4 or IPv6), in canonical form. */
export function publicIpAddress(ip: string): string {
  return validate(PublicIpSpec, { ip }).ip
}

export class PublicIpRequests {
  readonly #ipam: Ipam

  constructor(ipam: Ipam) {
    this.#ipam = ipam
  }

  /** Validates the address and reads its pool entry; refuses unregistering one not there. */
  async prepare(ip: string, change: PoolChange): Promise<PreparedPublicIp> {
    const address = publicIpAddress(ip)
    const status = await this.#entry(address)
    if (change === 'unregister' && !status) throw new NotFoundError('public IP', address)
    return { address, change, status }
  }

  /** Registers or unregisters the prepared address; a registered one answers its entry. */
  async apply(prepared: PreparedPublicIp): Promise<PublicIp | undefined> {
    const { address } = prepared
    if (prepared.change === 'unregister') {
      await this.#ipam.unregisterPublicIp(address).catch(async (error: unknown) => {
        if (!(error instanceof Conflict)) throw error
        // Said as the API lists it: a hold's DPU and host, not the hold's owner name.
        const taken = await this.#entry(address)
        throw new StoreConflict(
          `public IP ${address} is ${taken ? takenBy(taken) : 'taken'}`,
          'InUse',
        )
      })
      return undefined
    }
    await this.#ipam.registerPublicIp(address)
    return this.get(address)
  }

  /** What the prepared change would do to the pool; nothing else changes. */
  plan(prepared: PreparedPublicIp): ChangePlan {
    const { address, status } = prepared
    if (prepared.change === 'register') {
      return poolOnly([
        status ? `${address} is in the pool already` : `${address} would join the pool`,
      ])
    }
    if (status?.allocated) {
      throw new StoreConflict(`public IP ${address} is ${takenBy(status)}`, 'InUse')
    }
    return poolOnly([`${address} would leave the pool`])
  }

  /** A public IP of the pool, by any spelling of it; NotFound when it is not registered. */
  async get(ip: string): Promise<PublicIp> {
    const address = publicIpAddress(ip)
    const found = await this.#entry(address)
    if (!found) throw new NotFoundError('public IP', address)
    return found
  }

  /** The pool, as the API answers it (`publicIpOf`). */
  async list(): Promise<PublicIp[]> {
    return (await this.#ipam.listPublicIps()).map(publicIpOf)
  }

  async #entry(address: string): Promise<PublicIp | undefined> {
    return (await this.list()).find((p) => p.ip === address)
  }
}

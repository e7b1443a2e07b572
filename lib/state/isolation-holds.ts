/**
 * What a DPU may still announce for a host force-detached from it while its agent did not
 * answer: in Fabric mode the DPU's own FRR announces the host's /32 (/128) and, for
 * PublicAccess, its public IP, and the border leaks what is marked. Until that DPU
 * confirms it isolated the host, those addresses are not the host's to give back: they
 * are handed (each in one atomic step, never free in between) to an owner named for the
 * DPU's pending isolation (`isolationHoldOwner`), so that no other host (another
 * tenant's) can leak the same address or be given the same public IP while the border may
 * hold a route to the old DPU for it. They go back once the DPU acked the host's
 * `isolate` (`clearIsolatedStaleBindings`), or once the DPU leaves the inventory.
 *
 * Crash-safe: the hold is recorded before anything moves, each move is idempotent, and a
 * release drops the record last; a step cut in between and run again ends the same.
 *
 * @example
 * await holdUntilIsolated({ store, ipam }, 'dpu-1', 'h1', 4)
 * // fabric-leaks: 10.0.0.5 -> 'dpu:dpu-1:isolates:h1:4'; public IP 203.0.113.5 likewise
 * await releaseIsolationHold({ store, ipam }, 'dpu-1', 'dpu:dpu-1:isolates:h1:4')
 */
import type { StateStore } from './store.ts'

/** The public-IP pool operations a hold uses (`Ipam`'s). */
export interface HeldPublicIps {
  transferPublicIp(from: string, to: string, family?: 4 | 6): Promise<string | undefined>
  releasePublicIp(owner: string, family?: 4 | 6): Promise<string | undefined>
}

export interface IsolationHoldDeps {
  readonly store: Pick<StateStore, 'dpus' | 'fabricLeaks'>
  readonly ipam: HeldPublicIps
}

/** What a hold keeps: the leaked addresses and public IPs. */
export interface IsolationHold {
  readonly owner: string
  readonly host: string
  readonly addresses: readonly string[]
  readonly publicIps: readonly string[]
}

const OWNER = /^dpu:([a-z0-9-]+):isolates:([a-z0-9-]+):(\d+)$/

/**
 * The owner of what DPU `dpuId` may still announce for `host` at `specVersion` (a host's
 * spec version never repeats, so a host of the same name detached again holds apart).
 * Pure.
 */
export function isolationHoldOwner(dpuId: string, host: string, specVersion: number): string {
  return `dpu:${dpuId}:isolates:${host}:${specVersion}`
}

/** The DPU, host and spec version an owner names, when it is a hold's (`isolationHoldOwner`). Pure. */
export function parseIsolationHoldOwner(
  owner: string,
): { readonly dpuId: string; readonly host: string; readonly specVersion: number } | undefined {
  const match = OWNER.exec(owner)
  return match?.[1] && match[2] && match[3]
    ? { dpuId: match[1], host: match[2], specVersion: Number(match[3]) }
    : undefined
}

/**
 * Hands what `host` leaks and its public IPs to its DPU's pending isolation. Idempotent:
 * run again (a detach cut and run again), it moves nothing more and answers the same.
 */
export async function holdUntilIsolated(
  deps: IsolationHoldDeps,
  dpuId: string,
  host: string,
  specVersion: number,
): Promise<IsolationHold> {
  const owner = isolationHoldOwner(dpuId, host, specVersion)
  // Recorded first: a run cut after a move still finds what to give back.
  await deps.store.dpus.recordIsolationHold(dpuId, owner, host)
  const addresses = await deps.store.fabricLeaks.transfer(host, owner)
  const publicIps: string[] = []
  for (const family of [4, 6] as const) {
    const ip = await deps.ipam.transferPublicIp(host, owner, family)
    if (ip) publicIps.push(ip)
  }
  return { owner, host, addresses, publicIps }
}

/**
 * Gives back what one hold of DPU `dpuId` keeps (its isolation of that host confirmed), and
 * answers it (empty when there was none). Idempotent; the record goes last, and `dropped`
 * says whether this call dropped it: of runs releasing one hold at once, the one that says
 * so (the others may find it given back already).
 */
export async function releaseIsolationHold(
  deps: IsolationHoldDeps,
  dpuId: string,
  owner: string,
): Promise<IsolationHold & { readonly dropped: boolean }> {
  const host = parseIsolationHoldOwner(owner)?.host ?? ''
  const addresses = await deps.store.fabricLeaks.heldBy(owner)
  await deps.store.fabricLeaks.release(owner)
  const publicIps: string[] = []
  for (const family of [4, 6] as const) {
    const ip = await deps.ipam.releasePublicIp(owner, family)
    if (ip) publicIps.push(ip)
  }
  const dropped = await deps.store.dpus.dropIsolationHold(dpuId, owner)
  return { owner, host, addresses, publicIps, dropped }
}

/**
 * Gives back every hold of DPU `dpuId` (it left the inventory: nothing of it is announced
 * any more, or the operator says so). Returns what it gave back.
 */
export async function releaseIsolationHolds(
  deps: IsolationHoldDeps,
  dpuId: string,
): Promise<IsolationHold[]> {
  const released: IsolationHold[] = []
  for (const { owner } of await deps.store.dpus.isolationHolds(dpuId)) {
    released.push(await releaseIsolationHold(deps, dpuId, owner))
  }
  return released
}

/** Addresses as a message lists them: `10.0.0.5, 203.0.113.5`, or `nothing`. Pure. */
export function heldList(hold: Pick<IsolationHold, 'addresses' | 'publicIps'>): string {
  const all = [...new Set([...hold.addresses, ...hold.publicIps])]
  return all.length > 0 ? all.join(', ') : 'nothing'
}

import { AckTimeoutError, PrefixNotOwnedError } from './errors.ts'
import type { Announcement } from './render.ts'
import {
  type FrrState,
  parseBgpTable,
  parseRunningConfig,
  planChanges,
  planResync,
  type Wanted,
} from './state.ts'
import type { Vtysh } from './vtysh.ts'

/** Where announcements should come from: e.g. the allocated public IPs in the state store. */
export interface AnnouncementSource {
  /** Every prefix (`A.B.C.D/32`) that must be announced, with its next hop (the NAT IP). */
  desired(): Promise<Announcement[]>
}

/** What FRR shows for one prefix once a change is applied. */
export type Outcome =
  | { readonly prefix: string; readonly ok: true; readonly nextHop: string | null }
  | { readonly prefix: string; readonly ok: false; readonly error: Error }

export interface FrrController {
  /** Hydrazine's announcements and foreign prefixes, from the running configuration. */
  state(): Promise<FrrState>
  /** Locally originated prefixes in FRR's BGP table: prefix → next hop. */
  table(): Promise<Map<string, string>>
  /**
   * Makes FRR announce (next hop) or withdraw (null) each wanted prefix, in one vtysh
   * session, then waits until the BGP table shows every change. Never touches a prefix
   * configured by someone else: that prefix's outcome is PrefixNotOwnedError.
   */
  converge(wanted: Wanted): Promise<Map<string, Outcome>>
}

export interface FrrControllerOptions {
  readonly vtysh: Vtysh
  /** How long the BGP table may take to show a change (default 10 s). */
  readonly ackTimeoutMs?: number
  /** How often the BGP table is read while waiting (default 20 ms). */
  readonly pollMs?: number
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Hydrazine's handle on its FRR instance.
 *
 * @example
 * const frr = createFrrController({ vtysh: createVtysh({ vtyDir: '/var/run/frr' }) })
 * await frr.converge(new Map([['203.0.113.7/32', '172.18.0.105']]))
 */
export function createFrrController({
  vtysh,
  ackTimeoutMs = 10_000,
  pollMs = 20,
}: FrrControllerOptions): FrrController {
  const state = async () => parseRunningConfig(await vtysh.show('show running-config'))
  const table = async () => parseBgpTable(await vtysh.show('show bgp ipv4 unicast json'))

  return {
    state,
    table,
    async converge(wanted) {
      const plan = planChanges(await state(), wanted)
      await vtysh.configure(plan.commands)

      const outcomes = new Map<string, Outcome>()
      for (const prefix of plan.conflicts) {
        outcomes.set(prefix, { prefix, ok: false, error: new PrefixNotOwnedError(prefix) })
      }
      const waiting = new Map([...wanted].filter(([prefix]) => !outcomes.has(prefix)))
      const deadline = Date.now() + ackTimeoutMs
      for (;;) {
        const shown = await table()
        for (const [prefix, nextHop] of waiting) {
          if ((shown.get(prefix) ?? null) !== nextHop) continue
          outcomes.set(prefix, { prefix, ok: true, nextHop })
          waiting.delete(prefix)
        }
        if (waiting.size === 0) return outcomes
        if (Date.now() > deadline) break
        await sleep(pollMs)
      }
      for (const [prefix, nextHop] of waiting) {
        const expected = nextHop === null ? 'withdrawn' : `via ${nextHop}`
        outcomes.set(prefix, {
          prefix,
          ok: false,
          error: new AckTimeoutError(prefix, expected, ackTimeoutMs),
        })
      }
      return outcomes
    },
  }
}

export interface ResyncResult {
  readonly announced: number
  readonly withdrawn: number
  /** Prefixes the source wants but someone else configured by hand: left alone. */
  readonly conflicts: readonly string[]
  /** Prefixes whose change FRR's table did not show in time. */
  readonly failed: readonly string[]
  /**
   * Hydrazine prefixes the source does not want, left announced because withdrawing them
   * looked like an empty or partial store, not drift (see `planResync`). An operator
   * checks the store, then withdraws them by hand if they really are stale.
   */
  readonly held: readonly string[]
}

export interface ResyncOptions {
  /**
   * Most Hydrazine prefixes one resync may withdraw (default 16); with more to withdraw,
   * or with a source that wants nothing at all, it withdraws none and reports them `held`.
   */
  readonly maxWithdrawals?: number
}

/** The default of `ResyncOptions.maxWithdrawals`. */
export const RESYNC_MAX_WITHDRAWALS = 16

/**
 * Repair: announces everything the source wants and withdraws every Hydrazine prefix it
 * does not (prefixes configured by operators are never withdrawn), within the guard of
 * `planResync`. Run at the FRR consumer's start and then periodically.
 */
export async function resync(
  frr: FrrController,
  source: AnnouncementSource,
  { maxWithdrawals = RESYNC_MAX_WITHDRAWALS }: ResyncOptions = {},
): Promise<ResyncResult> {
  const desired = await source.desired()
  const current = await frr.state()
  const { wanted, held } = planResync(current.owned, desired, maxWithdrawals)

  let announced = 0
  let withdrawn = 0
  const conflicts: string[] = []
  const failed: string[] = []
  for (const [prefix, outcome] of await frr.converge(wanted)) {
    if (outcome.ok) {
      const before = current.owned.get(prefix) ?? null
      if (outcome.nextHop !== before) outcome.nextHop === null ? withdrawn++ : announced++
    } else if (outcome.error instanceof PrefixNotOwnedError) conflicts.push(prefix)
    else failed.push(prefix)
  }
  return { announced, withdrawn, conflicts, failed, held }
}

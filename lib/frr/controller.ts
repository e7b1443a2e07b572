import { AckTimeoutError, InvalidAnnouncementError, PrefixNotOwnedError } from './errors.ts'
import { IP_FAMILIES, prefixFamily } from './prefix.ts'
import type { Announcement } from './render.ts'
import {
  applyPlan,
  type FrrModel,
  type FrrState,
  parseBgpPrefix,
  parseBgpTable,
  parseRunningConfig,
  planChanges,
  planResync,
  toModel,
  type Wanted,
} from './state.ts'
import type { Vty } from './vty.ts'

/** Where announcements should come from: e.g. the allocated public IPs in the state store. */
export interface AnnouncementSource {
  /**
   * Every prefix that must be announced (`A.B.C.D/32`, `<ipv6>/128`), with its next hop
   * (the DPU's NAT address of the same family).
   */
  desired(): Promise<Announcement[]>
}

/** What FRR shows for one prefix once a change is applied. */
export type Outcome =
  | { readonly prefix: string; readonly ok: true; readonly nextHop: string | null }
  | { readonly prefix: string; readonly ok: false; readonly error: Error }

export interface FrrController {
  /**
   * Hydrazine's announcements and foreign prefixes, read from the running configuration
   * now; also what later changes are planned from until the next read.
   */
  state(): Promise<FrrState>
  /**
   * Locally originated prefixes in FRR's whole BGP table, IPv4 and IPv6 unicast: prefix →
   * next hop (for a /128, the global next hop its route-map sets).
   */
  table(): Promise<Map<string, string>>
  /**
   * Makes FRR announce (next hop) or withdraw (null) each wanted prefix, in one vty
   * session, then waits until bgpd shows each change for that prefix. Never touches a
   * prefix configured by someone else: that prefix's outcome is PrefixNotOwnedError; a
   * change it cannot make (a /128 via an IPv4 next hop, …) is InvalidAnnouncementError.
   *
   * Plans from the configuration kept in memory since the last `state()` (read once when
   * there is none, and again after bgpd's connection dropped or a command was refused),
   * so planning, sending and acking a change cost O(its own prefixes) however many are
   * announced; with `saveConfig`, bgpd's `write file` is O(all of them) (7 ms at 10,000).
   * Calls must not overlap (they plan from one model): the batcher and the consumer's
   * gate run them one at a time.
   */
  converge(wanted: Wanted): Promise<Map<string, Outcome>>
  /**
   * Calls `listener` when the connection to bgpd was lost and is back: bgpd may have
   * restarted with its startup configuration, and wants a resync.
   */
  onReconnect(listener: () => void): void
  /**
   * How many prefixes (IPv4 /32s and IPv6 /128s) Hydrazine announces, as last read or
   * changed (undefined before the first read): the size of the configuration kept in
   * memory, for metrics.
   */
  announced(): number | undefined
}

export interface FrrControllerOptions {
  /** A connection to Hydrazine's bgpd (`createVty`). */
  readonly vty: Vty
  /**
   * Save bgpd's running configuration to its config file (`write file`) before a change
   * is acknowledged, so a restarted bgpd announces everything acknowledged before (set
   * where bgpd starts from its own file, as the embedded FRR does; default false).
   */
  readonly saveConfig?: boolean
  /** How long bgpd may take to show a change (default 10 s). */
  readonly ackTimeoutMs?: number
  /** How often a prefix not yet showing its change is read again (default 5 ms). */
  readonly pollMs?: number
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Hydrazine's handle on its FRR instance.
 *
 * @example
 * const frr = createFrrController({ vty: createVty({ vtyDir: '/var/run/frr' }) })
 * await frr.converge(new Map([['203.0.113.7/32', '172.18.0.105']]))
 */
export function createFrrController({
  vty,
  saveConfig = false,
  ackTimeoutMs = 10_000,
  pollMs = 5,
}: FrrControllerOptions): FrrController {
  let model: FrrModel | undefined
  /** Changes applied since the running configuration was last saved. */
  let unsaved = false
  /** Hydrazine's announcements as last known (kept while the model is read again). */
  let announced: number | undefined

  const state = async () => {
    const read = parseRunningConfig(await vty.show('show running-config'))
    model = toModel(read)
    announced = model.owned.size
    return read
  }
  vty.onReconnect(() => {
    model = undefined
  })

  /**
   * Each prefix's next hop as bgpd shows it now (null: not announced), in one session;
   * each prefix is read from its own family's table (bgpd refuses the other).
   */
  const shown = async (prefixes: readonly string[]) => {
    const replies = await vty.session(
      prefixes.map((p) => `show bgp ${prefixFamily(p)} unicast ${p} json`),
    )
    return new Map(replies.map((r, i) => [prefixes[i] ?? '', parseBgpPrefix(r.output)]))
  }

  return {
    state,
    async table() {
      const table = new Map<string, string>()
      for (const family of IP_FAMILIES) {
        for (const entry of parseBgpTable(await vty.show(`show bgp ${family} unicast json`)))
          table.set(...entry)
      }
      return table
    },
    onReconnect: (listener) => vty.onReconnect(listener),
    announced: () => announced,
    async converge(wanted) {
      if (!model) await state()
      const current = model as FrrModel
      const plan = planChanges(current, wanted)
      if (plan.commands.length > 0) {
        try {
          await vty.configure(plan.commands)
        } catch (error) {
          // Some lines may have been applied: plan the next change from a fresh read.
          model = undefined
          throw error
        }
        applyPlan(current, plan)
        announced = current.owned.size
        unsaved = true
      }
      if (saveConfig && unsaved) {
        await vty.save()
        unsaved = false
      }

      const outcomes = new Map<string, Outcome>()
      for (const prefix of plan.conflicts) {
        outcomes.set(prefix, { prefix, ok: false, error: new PrefixNotOwnedError(prefix) })
      }
      for (const { prefix, reason } of plan.invalid) {
        const error = new InvalidAnnouncementError(prefix, wanted.get(prefix) ?? null, reason)
        outcomes.set(prefix, { prefix, ok: false, error })
      }
      const waiting = new Map([...wanted].filter(([prefix]) => !outcomes.has(prefix)))
      const deadline = Date.now() + ackTimeoutMs
      for (;;) {
        for (const [prefix, nextHop] of await shown([...waiting.keys()])) {
          if (nextHop !== waiting.get(prefix)) continue
          outcomes.set(prefix, { prefix, ok: true, nextHop })
          waiting.delete(prefix)
        }
        if (waiting.size === 0) return outcomes
        if (Date.now() > deadline) break
        await sleep(pollMs)
      }
      // A change bgpd never showed may mean the kept configuration is wrong (changed by
      // hand): the next change plans from a fresh read.
      if (waiting.size > 0) model = undefined
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
  /**
   * Prefixes whose change FRR's table did not show in time, or that the source asked for
   * in a form Hydrazine cannot announce (InvalidAnnouncementError).
   */
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

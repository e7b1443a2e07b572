import { HydrazineError } from '../../lib/errors.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import {
  type ApplyResult,
  applyDesiredRows,
  CentralUnavailableError,
  compileGroupTopology,
  deleteGroupTopology,
  type OvnCentralEndpoints,
  ownerOf,
  type PolicyStatus,
} from '../../lib/ovn/index.ts'
import { compareOvnReleases } from '../../lib/ovn/install.ts'
import { centralRunningStatus, centralWanted, onDemand } from './central-demand.ts'
import type {
  AgentDirectory,
  GroupApplied,
  GroupApplies,
  GroupApplyRequest,
  HandlerDeps,
} from './deps.ts'
import { isPermanent } from './errors.ts'
import {
  appliedStatus,
  type GroupState,
  membersStatusOf,
  readGroupState,
  type TopologyProblems,
  topologyOf,
} from './group-state.ts'
import { groupFailed } from './status.ts'

export type { GroupApplied, GroupApplyRequest } from './deps.ts'

interface InFlight {
  running?: Promise<GroupApplied> | undefined
  next?: Promise<GroupApplied> | undefined
}

type ApplierDeps = Pick<HandlerDeps, 'store' | 'ipam' | 'ovn' | 'nb' | 'fabric' | 'dnsZone'> &
  Partial<Pick<HandlerDeps, 'southbound' | 'centralsOnDemand' | 'agents'>>

/**
 * How long an apply queued behind another waits after it when nothing tells when
 * ovn-northd is done with the one before (no SB to follow, or it added and removed no
 * port): the callers arriving meanwhile share it. In the scale bench (10 groups × 200
 * hosts, a central each, 2 cores) 150 ms took a burst from 58 to 67 attaches/s and a
 * steady 100/s from p95 17.7 s to 9.0 s (400 ms: no better).
 */
export const APPLY_BATCH_MS = 150

/**
 * At most one change of a group's DNS records per this long: a host's records reach NB at
 * its attach when the group's DNS did not change within it, else with the next change
 * after it (within this long). Every change of a group's DNS makes each ovn-controller of
 * the group recompute all its logical flows (ovn-controller before OVN 25.03 handles no SB
 * `DNS` change incrementally: measured in the lab, one recompute of 13–48 ms per attach on
 * every other DPU of a 30-host group, growing with the group; in the full lab most of the
 * DPUs' recomputes, docs/benchmarks.md), so a burst of attaches shares one.
 */
export const DNS_BATCH_MS = 2_000

/**
 * The first OVN release whose ovn-controller handles a change of the SB `DNS` table
 * incrementally (ovn-org/ovn 817d4e53e, "Add a separate dns cache module and I-P for SB
 * DNS"): a group whose DPUs all run one has its DNS changes published at once.
 */
export const INCREMENTAL_DNS_CONTROLLER = '25.03'

/** How long the DPUs' ovn-controller versions read for `dnsCostsRecomputes` are kept. */
const OVN_VERSIONS_KEPT_MS = 30_000

/**
 * Whether a DNS change of the group would make one of its DPUs' ovn-controllers recompute
 * all its logical flows: a DPU reports an ovn-controller older than
 * `INCREMENTAL_DNS_CONTROLLER`, or none (no heartbeat, an agent that does not say, no
 * directory of agents at all).
 */
export async function dnsCostsRecomputes(
  agents: Pick<AgentDirectory, 'ovnVersionOf'> | undefined,
  dpus: Iterable<string>,
): Promise<boolean> {
  if (!agents) return true
  const versions = await Promise.all(
    [...new Set(dpus)].map((dpu) => agents.ovnVersionOf(dpu).catch(() => undefined)),
  )
  return versions.some(
    (v) => v === undefined || compareOvnReleases(v, INCREMENTAL_DNS_CONTROLLER) < 0,
  )
}

/** How a group's NB commits are paced by its ovn-northd (`COMMIT_PACE`). */
export interface CommitPace {
  readonly floorMs: number
  readonly ceilingMs: number
  readonly northdShare: number
}

/**
 * The wait between commits to one central when its SB is followed (`Southbound.settled`):
 * the next commit goes once ovn-northd has processed the last one, and no sooner than
 * `lag / northdShare` after it (`lag`: how long northd took to make the last commit's
 * Port_Bindings), at least `floorMs` after it and at most `ceilingMs` (a northd that is
 * down or far behind does not stop the group's changes). Paced per central: the groups
 * of a shared central commit together, in one pass of its northd.
 *
 * The lag counts northd's first pass only: OVN 23.03 recomputes the whole central again
 * for the echo of its own SB writes and for each chassis' bind and `up` of the new ports
 * (about four passes per commit), so 1/4 keeps a 23.03 northd about as busy as the
 * attaches demand and no busier. Measured on the 2-core development machine:
 * - `npm run bench -- attach` (1,000 attaches, 20 groups on one shared central): 146/s,
 *   Ready p95 1.9 s with 1/4; 126/s, p95 3.9 s with 1/20 (the 150 ms batch before the
 *   pace: 91/s, p95 4.5 s).
 * - the scale bench's northd round (10 attaches/s into a 1,000-host group on 23.03):
 *   northd spends 67 ms of CPU per attach (2.2 full recomputes) with 1/4, 9 ms (0.14) with
 *   1/20 — at 10/s, one commit every 3 s. A northd that processes a commit incrementally
 *   (OVN ≥ 23.09, `HYDRAZINE_OVN_INSTALL`) has a lag of a few ms and recomputes nothing:
 *   commits every 20–100 ms cost it little.
 */
export const COMMIT_PACE: CommitPace = { floorMs: 20, ceilingMs: 3000, northdShare: 0.25 }

/**
 * The first OVN release whose ovn-northd processes an ordinary attach incrementally: switch
 * ports and the SB's Port_Binding changes (a chassis' bind, `up`) handled without a full
 * recompute, and its own SB writes' echo ignored.
 */
export const INCREMENTAL_NORTHD = '23.09'

/** Whether a central's ovn-northd of this version processes attaches incrementally. */
export function northdIsIncremental(northdVersion: string | undefined): boolean {
  return northdVersion !== undefined && compareOvnReleases(northdVersion, INCREMENTAL_NORTHD) >= 0
}

/**
 * The pace for a central's ovn-northd of this version (unknown: as 23.03's). One that
 * processes attaches incrementally spends CPU in proportion to the ports a commit changes,
 * not to the central's size, so fewer, larger commits save it little: its next commit goes
 * once it processed the last (`northdShare` 1), and busy centrals are not spaced out for
 * each other's northd (`commitDelayMs`). Measured in the scale bench's steady round on
 * Debian 13's OVN 25.03 (10 groups × 1,000 hosts at 100/s, 2 cores shared with other
 * work, alternated runs): Ready p95 2.0 / 3.9 s against 4.7 / 4.7 s with 23.03's pace, at
 * 5,002 / 2,739 commits against 2,596 / 2,289, node's CPU 62 → 67–85 % of a core.
 */
export function paceOf(pace: CommitPace, northdVersion: string | undefined): CommitPace {
  return northdIsIncremental(northdVersion) ? { ...pace, northdShare: 1 } : pace
}

/**
 * When a central's next commit may go, in ms after its last one: `lag / northdShare`
 * (see `COMMIT_PACE`), stretched when more centrals than `northdCpus` committed within
 * the last `ceilingMs` and their ovn-northd processes share those cores
 * (`OvnCentralProvider.northdCpus`: the embedded per-group centrals on one machine):
 * by `busyCentrals / northdCpus`, so that together they ask for about `northdCpus` cores,
 * not one each — unless their ovn-northd (`northdVersion`) processes attaches
 * incrementally (`paceOf`). Then within the floor and the ceiling.
 *
 * Measured in the scale bench (10 groups × 1,000 hosts, a central each on 2 cores, a
 * steady 100 attaches/s, OVN 23.03): each central paced as if alone committed 5.8 ports at
 * a time, 6 times a second in all, and its northd spent ~150 ms of CPU per commit (~25 ms
 * per attach): 10 northds asked for several cores and the backlog grew without bound.
 *
 * Where the provider measures a central's ovn-northd (`northdCpuMs`: the CPU it used
 * since the central's commit before, every pass of it), that CPU is what the crowd
 * stretches, and `lag / northdShare` alone is only a floor: the lag of a northd sharing
 * its cores with busy others counts the time it waited for them too, and stretching it
 * again by the crowd counted them twice (20 centrals on 2 cores waited ~40 times a lag of
 * mostly waiting). The attach bench's Ready p95 with a central per group fell from
 * 1.3–2.5 s to 0.9–1.1 s, the scale bench's steady per-group p95 from 2.9 to 2.5 s; a
 * central alone is paced by its lag as before.
 */
export function commitDelayMs(
  pace: CommitPace,
  lagMs: number,
  crowd: { readonly busyCentrals: number; readonly northdCpus?: number | undefined } = {
    busyCentrals: 1,
  },
  northdVersion?: string,
  northdCpuMs?: number,
): number {
  const { northdCpus, busyCentrals } = crowd
  const incremental = northdIsIncremental(northdVersion)
  const shares = northdCpus !== undefined && northdCpus > 0 && !incremental
  const stretch = shares ? Math.max(1, busyCentrals / northdCpus) : 1
  // In a crowd, the CPU its northd used since the commit before (every pass, measured) is
  // what the crowd shares; its own lag over its share still bounds how often one northd is
  // asked. Out of a crowd (or unmeasured) the lag paces it: a northd with cores to spare
  // is kept busy by its chassis too (their binds and updates), which is no reason to hold
  // the group's changes back.
  const wait =
    northdCpuMs !== undefined && stretch > 1
      ? Math.max(northdCpuMs * stretch, lagMs / pace.northdShare)
      : (lagMs * stretch) / pace.northdShare
  return Math.min(pace.ceilingMs, Math.max(pace.floorMs, wait))
}

/** One paced commit, as `GroupApplier`'s `onCommit` hears of it. */
export interface GroupCommitted {
  readonly group: string
  /** Logical switch ports the commit inserted plus those it deleted. */
  readonly ports: number
  /** From the commit until ovn-northd had processed it, or until the ceiling. */
  readonly northdSeconds: number
  /** False when the ceiling passed (or the SB could not be asked) first. */
  readonly caughtUp: boolean
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Applies a group's whole current topology to its OVN NB: read the group's state, compute
 * its topology (pure), commit the difference, then return relay addresses NB no longer
 * uses to the pool — in that order, one way.
 *
 * Every apply also keeps the group's status true to what it applied (written only when it
 * changed): its members' count and NAT IPs, and what the topology left out. An error
 * retrying cannot cure (NB refused the transaction, the topology is invalid) makes the
 * group `Failed` with `OvnConfigured=False` saying why; the next apply that succeeds
 * makes it Ready again.
 *
 * Applies of one group through one applier are coalesced: while one runs, every caller
 * that arrives shares the single apply that starts when it ends. That apply reads the
 * group's state after all of them made their changes (allocations, deletion marks), so
 * each caller's change is in it — 50 concurrent attaches cost a few applies, not 50 that
 * race for the same rows. Across processes, lib/ovn's generation guard keeps concurrent
 * applies from losing each other's work.
 *
 * A group's next commit goes when ovn-northd has processed the one before it (the SB has
 * the `Port_Binding`s of the ports it added and not those it removed), as `COMMIT_PACE`
 * says; without an SB to follow, a queued apply starts `batchMs` (default
 * `APPLY_BATCH_MS`) after the one before. Commits paced by northd carry what arrived while
 * it worked: the busier northd is, the larger and fewer they get. An apply with none
 * running and no commit the pace still holds starts at once. A caller that should not
 * wait through the pace holding a worker slot asks with `request` and parks while it
 * `waits` (host.attach, `ParkedWork`).
 *
 * @example
 * const groups = new GroupApplier(deps)
 * const { endpoints } = await groups.apply('group-a')
 */
export class GroupApplier implements GroupApplies {
  readonly #deps: ApplierDeps
  readonly #batchMs: number
  readonly #pace: CommitPace
  readonly #onCommit: ((commit: GroupCommitted) => void) | undefined
  /**
   * Per central (its SB remote) whose last commit the pace still holds: when its groups'
   * next commit may go, known once its ovn-northd has processed the last one (or the
   * ceiling passed). Paced per central, not per group: groups sharing a central share its
   * northd, and their commits waiting for the same moment reach it together, costing it
   * one pass.
   */
  readonly #nextCommit = new Map<string, Promise<number>>()
  /** Per central (its SB remote): when it last committed ports (`commitDelayMs`' crowd). */
  readonly #lastCommit = new Map<string, number>()
  /** Per central (its SB remote): its ovn-northd's CPU ms when its last commit settled. */
  readonly #northdCpu = new Map<string, number>()
  /** Per group: the SB remote of its central, as its last apply found it. */
  readonly #centralOf = new Map<string, string>()
  /** Per group: the apply in flight, and the one queued behind it that later callers share. */
  readonly #inFlight = new Map<string, InFlight>()
  /** Groups whose next apply compares every row (see `apply`). */
  readonly #compareAll = new Set<string>()
  /** Per group: when an apply last committed a change to its DNS records. */
  readonly #dnsPublished = new Map<string, number>()
  /** Per group: the apply that publishes its held DNS changes, when one is due. */
  readonly #dnsDue = new Map<string, NodeJS.Timeout>()
  /**
   * The ovn-controller version each DPU's heartbeat reported, read at most once per
   * `OVN_VERSIONS_KEPT_MS` (all forgotten together then): a burst into a group of a
   * thousand DPUs reads their heartbeats once, not once per apply.
   */
  #ovnVersions = new Map<string, Promise<string | undefined>>()
  #ovnVersionsSince = 0

  constructor(
    deps: ApplierDeps,
    options: {
      readonly batchMs?: number
      readonly pace?: CommitPace
      /** Told of every commit that added or removed ports, once northd has processed it. */
      readonly onCommit?: (commit: GroupCommitted) => void
    } = {},
  ) {
    this.#deps = deps
    this.#batchMs = options.batchMs ?? APPLY_BATCH_MS
    this.#pace = options.pace ?? COMMIT_PACE
    this.#onCommit = options.onCommit
  }

  /**
   * What an apply queued behind another waits for once that one ended: the time the pace
   * allows after the group's last commit (see `COMMIT_PACE`), or, when ovn-northd's work on
   * it cannot be followed, the batch interval.
   */
  async #pause(group: string): Promise<void> {
    if (!this.#isPaced(group)) return this.#batchMs > 0 ? sleep(this.#batchMs) : undefined
    await this.#paced(group)
  }

  /** Whether the group's central has a commit the pace still holds. */
  #isPaced(group: string): boolean {
    const central = this.#centralOf.get(group)
    return central !== undefined && this.#nextCommit.has(central)
  }

  /** Waits until the pace allows the next commit to the group's central; then forgets the last one. */
  async #paced(group: string): Promise<void> {
    const central = this.#centralOf.get(group)
    const next = central === undefined ? undefined : this.#nextCommit.get(central)
    if (central === undefined || !next) return
    const wait = (await next) - performance.now()
    if (wait > 0) await sleep(wait)
    if (this.#nextCommit.get(central) === next) this.#nextCommit.delete(central)
  }

  /**
   * Follows ovn-northd's processing of a commit of the group that added or removed ports:
   * the group's next commit may go `lag / northdShare` after this one (within the floor and
   * ceiling), `lag` being how long northd took to process it.
   */
  #follow(group: string, sbRemote: string, result: ApplyResult, northdVersion?: string): void {
    const { southbound } = this.#deps
    const { added, removed } = result.ports
    if (!southbound || (added.length === 0 && removed.length === 0)) return
    const committed = performance.now()
    const pace = this.#pace
    this.#lastCommit.set(sbRemote, committed)
    const next = southbound
      .settled(sbRemote, result.ports, pace.ceilingMs)
      .catch(() => false)
      .then(async (caughtUp) => {
        const lag = performance.now() - committed
        // Only a northd that recomputes its central (before INCREMENTAL_NORTHD) is paced by
        // its CPU (`commitDelayMs`): reading it from /proc for another is work for nothing.
        const cpu = northdIsIncremental(northdVersion)
          ? undefined
          : await this.#northdSpent(group, sbRemote)
        this.#onCommit?.({
          group,
          ports: added.length + removed.length,
          northdSeconds: lag / 1000,
          caughtUp,
        })
        const crowd = { busyCentrals: this.#busyCentrals(), northdCpus: this.#deps.ovn.northdCpus }
        const delay = commitDelayMs(paceOf(pace, northdVersion), lag, crowd, northdVersion, cpu)
        return committed + delay
      })
    this.#nextCommit.set(sbRemote, next)
  }

  /**
   * The CPU the group's central's ovn-northd used since the central's last commit settled
   * (what it spent on that commit's later passes and this one's first), when the provider
   * can tell; undefined the first time, and after a restart of that northd.
   */
  async #northdSpent(group: string, central: string): Promise<number | undefined> {
    const { ovn } = this.#deps
    const now = await ovn.northdCpuMs?.(group).catch(() => undefined)
    const before = this.#northdCpu.get(central)
    if (now === undefined) this.#northdCpu.delete(central)
    else this.#northdCpu.set(central, now)
    return now !== undefined && before !== undefined && now >= before ? now - before : undefined
  }

  /**
   * Centrals that committed ports within the pace's ceiling (forgetting those that did not,
   * and their northd's CPU figure).
   */
  #busyCentrals(): number {
    const since = performance.now() - this.#pace.ceilingMs
    for (const [central, at] of this.#lastCommit) {
      if (at >= since) continue
      this.#lastCommit.delete(central)
      // Idle since: what its northd did meanwhile was its chassis' work, not a commit's.
      this.#northdCpu.delete(central)
    }
    return Math.max(1, this.#lastCommit.size)
  }

  /**
   * Applies the group; rejects with `GroupGone` when it no longer exists. With
   * `compareAll`, the apply compares every row of the group with NB, not only what
   * changed since the group's last apply (reconcile's check of what the NB cache's
   * change log cannot show).
   */
  apply(group: string, options: { compareAll?: boolean } = {}): Promise<GroupApplied> {
    return this.request(group, options).applied
  }

  /**
   * Starts or joins the apply that covers what the caller wrote before asking, without
   * waiting for it: `waits` says whether that apply is queued (behind one running, or
   * behind the pace of the group's central) rather than started at once. A caller that
   * would hold something scarce meanwhile (a job its worker slot) can give it back while
   * a queued apply waits, and take `applied` when it settles (`ParkedWork`).
   */
  request(group: string, options: { compareAll?: boolean } = {}): GroupApplyRequest {
    if (options.compareAll) this.#compareAll.add(group)
    const state: InFlight = this.#inFlight.get(group) ?? {}
    this.#inFlight.set(group, state)
    const start = () => {
      // The flag goes with the apply that starts now: one already under way may have
      // read NB before the caller asked.
      const compareAll = this.#compareAll.delete(group)
      const running = this.#applyOnce(group, compareAll).finally(() => {
        if (state.running === running) state.running = undefined
        if (!state.running && !state.next) this.#inFlight.delete(group)
      })
      state.running = running
      return running
    }
    // An apply queued and waiting out its batch interval is the one to share, even while
    // none runs.
    if (state.next) return { applied: state.next, waits: true }
    // With none running, an apply starts at once unless the group's last commit is still
    // being processed by its northd, or was too recent for the pace: then it waits, and
    // whoever arrives meanwhile rides with it.
    const paced = this.#isPaced(group)
    if (!state.running && !paced) return { applied: start(), waits: false }
    const before = state.running?.catch(() => undefined) ?? Promise.resolve()
    state.next = before
      .then(() => (state.running === undefined && paced ? this.#paced(group) : this.#pause(group)))
      .then(() => {
        state.next = undefined
        return start()
      })
    return { applied: state.next, waits: true }
  }

  /** The DPUs' ovn-controller versions, as `dnsCostsRecomputes` asks them (kept a while). */
  #agentVersions(): Pick<AgentDirectory, 'ovnVersionOf'> | undefined {
    const agents = this.#deps.agents
    if (!agents) return undefined
    return {
      ovnVersionOf: (dpu) => {
        const now = performance.now()
        if (now - this.#ovnVersionsSince > OVN_VERSIONS_KEPT_MS) {
          this.#ovnVersions = new Map()
          this.#ovnVersionsSince = now
        }
        let version = this.#ovnVersions.get(dpu)
        if (!version) {
          // Unknown when it cannot be read (held, as for an old one), and read again later.
          version = agents.ovnVersionOf(dpu).catch(() => undefined)
          this.#ovnVersions.set(dpu, version)
        }
        return version
      },
    }
  }

  /** Whether the group's DNS changed less than `DNS_BATCH_MS` ago: its next changes wait. */
  #holdsDns(group: string): boolean {
    const published = this.#dnsPublished.get(group)
    return published !== undefined && performance.now() - published < DNS_BATCH_MS
  }

  /** An apply once the group's DNS may change again, to publish what this one held. */
  #publishDnsLater(group: string): void {
    if (this.#dnsDue.has(group)) return
    const since = performance.now() - (this.#dnsPublished.get(group) ?? 0)
    const timer = setTimeout(
      () => {
        this.#dnsDue.delete(group)
        // Failures are the apply's to report (its status); a later change applies again.
        this.request(group).applied.catch(() => undefined)
      },
      Math.max(0, DNS_BATCH_MS - since),
    )
    timer.unref()
    this.#dnsDue.set(group, timer)
  }

  async #applyOnce(name: string, compareAll: boolean): Promise<GroupApplied> {
    const deps = this.#deps
    try {
      // On demand, a group that gave its central slot back (no host for the grace period,
      // or deleted) has nothing to apply: an apply that comes late must not start its
      // central again.
      if (!(await centralWanted(deps, name))) throw new GroupGone(name)
      const endpoints = await deps.ovn.ensure(name)
      this.#centralOf.set(name, endpoints.sbController)
      const { client, cache } = await deps.nb.get(endpoints.nb)
      if (compareAll) cache.applied.delete(ownerOf(name))
      let state: GroupState | undefined
      let problems: TopologyProblems = []
      let policies: PolicyStatus | undefined
      let dnsHeld = false
      // Read on every attempt, after NB's generation of the group is noted (`group`): after
      // a lost race (another process applied this group), the group's members are read
      // again, so the winner's host is not undone.
      const read = async () => {
        state = await readGroupState(deps, name)
        if (!state) throw new GroupGone(name)
        if (state.group.deletion && state.members.length === 0) throw new LastHostLeft(name)
        const topology = topologyOf(state, deps.fabric, deps.dnsZone)
        // Held only where publishing would cost the group's DPUs a full recompute each.
        const holdDns =
          this.#holdsDns(name) &&
          (await dnsCostsRecomputes(
            this.#agentVersions(),
            state.members.map((m) => m.host.spec.dpu.id),
          ))
        const desired = compileGroupTopology(topology, cache.compiled, { holdDns })
        dnsHeld = desired.dnsHeld === true
        problems = desired.problems ?? []
        policies = desired.policies
        return desired
      }
      const result = await applyDesiredRows(client, read, {
        cache,
        group: name,
        // Every row compared: against NB as of now, not as far as the cache got.
        ...(compareAll ? { sync: true } : {}),
      }).catch(async (error: unknown) => {
        if (!(error instanceof LastHostLeft)) throw error
        // A group being deleted whose hosts have all left keeps no row: the last host's
        // port goes (even when its DPU could not isolate it), and an apply that comes late
        // (a detach's, queued behind the pace) writes no base rows back after group.delete
        // removed them.
        await deleteGroupTopology(client, name, { cache })
        throw new GroupGone(name)
      })
      if (result.changed)
        this.#follow(name, endpoints.sbController, result, endpoints.northdVersion)
      if (result.touched.some((id) => id.startsWith('DNS/')))
        this.#dnsPublished.set(name, performance.now())
      if (dnsHeld) this.#publishDnsLater(name)
      if (!state) throw new GroupGone(name)
      // Relays of DPUs without members are gone from NB now: their addresses go back to the
      // pool (so that the network can be deleted).
      for (const owner of state.staleRelayOwners) await deps.ipam.release(name, owner)
      await reportApplied(deps, state, problems, endpoints.service, policies)
      if (onDemand(deps)) await reportCentralRunning(deps, state.group, endpoints)
      return { endpoints, state, result, problems }
    } catch (error) {
      if (error instanceof GroupGone) {
        this.#centralOf.delete(name)
        this.#dnsPublished.delete(name)
      }
      if (isPermanent(error) && !(error instanceof GroupGone)) {
        // The apply's error is the one the caller must see, even if the status write fails.
        await reportFailed(deps, name, error).catch(() => undefined)
      }
      throw error
    }
  }
}

/** The group's status after an apply, written only when it says something new. */
async function reportApplied(
  deps: Pick<HandlerDeps, 'store'>,
  state: GroupState,
  problems: TopologyProblems,
  ovnService: string,
  policies: PolicyStatus | undefined,
): Promise<void> {
  const members = membersStatusOf(state)
  if (!appliedStatus(state.group, members, problems, ovnService, policies)) return
  await deps.store.groups.updateStatus(state.group.name, (group) =>
    group.deletion ? undefined : appliedStatus(group, members, problems, ovnService, policies),
  )
}

/**
 * Centrals on demand: an apply ran against the group's central, so it runs; the group says
 * so, and where it is (written only when that is new: its first apply after a start).
 */
async function reportCentralRunning(
  deps: Pick<HandlerDeps, 'store'>,
  read: Pick<ResourceGroup, 'name' | 'status'>,
  endpoints: OvnCentralEndpoints,
): Promise<void> {
  if (!centralRunningStatus(read.status, endpoints)) return
  await deps.store.groups.updateStatus(read.name, (group) =>
    group.deletion ? undefined : centralRunningStatus(group.status, endpoints),
  )
}

/** The group is Failed for a reason retrying cannot cure; written once per reason. */
async function reportFailed(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  error: HydrazineError,
): Promise<void> {
  const reason = error instanceof CentralUnavailableError ? error.reason : error.code
  await deps.store.groups.updateStatus(name, (group) => {
    const { status } = group
    const ovn = status.conditions.find((c) => c.type === 'OvnConfigured')
    const known =
      status.phase === 'Failed' && ovn?.status === 'False' && ovn.message === error.message
    if (group.deletion || known) return undefined
    return groupFailed(status, {
      type: 'OvnConfigured',
      status: 'False',
      reason,
      message: error.message,
    })
  })
}

/**
 * A group being deleted has no host left: its rows are removed, not applied (`#applyOnce`).
 */
class LastHostLeft extends Error {
  constructor(readonly group: string) {
    super(`resource group ${group} is being deleted and has no host left`)
  }
}

/**
 * The group was deleted before its topology could be applied, or is being deleted and has
 * no host left (its rows removed); retrying cannot help.
 */
export class GroupGone extends HydrazineError {
  constructor(readonly group: string) {
    super('GROUP_GONE', `resource group ${group} no longer exists`)
  }
}

/**
 * Where an attach's time goes in `npm run bench -- attach`: when each step of it happened,
 * from what the bench sees anyway — the client's answer, the controller queue's events
 * (`active`, `completed`), host.attach's checkpoints (`HandlerDeps.checkpoint`), the shared
 * central's NB and SB followed by OVSDB monitors (the host's `Logical_Switch_Port`
 * inserted by the group apply's commit, its `Port_Binding` made by ovn-northd), and the
 * in-process agent's `configure` (taken, bound in the SB by FakeChassis, acked). A
 * monitored moment is when this process heard of the change.
 */
import {
  Database,
  type MonitorHandle,
  type NbTables,
  nbSchema,
  OvsdbClient,
  type SbTables,
  sbSchema,
  type TableUpdates,
  topologyNames,
} from '../../lib/ovn/index.ts'
import type { BenchPipeline, RoundMoments } from './fixtures.ts'
import { quantile } from './report.ts'

const NB = new Database<NbTables>(nbSchema)
const SB = new Database<SbTables>(sbSchema)

/** One host's attach, every moment the bench saw (`performance.now()` ms). */
export interface AttachMoments {
  /** The bench asked the client to apply the host. */
  readonly put: number
  /** The client answered: spec stored, host.attach queued. */
  readonly accepted?: number | undefined
  /** A worker took host.attach. */
  readonly started?: number | undefined
  /** Its converge step asked for the group's apply (`attach:allocated`). */
  readonly applying?: number | undefined
  /** The NB commit that inserted the host's port. */
  readonly committed?: number | undefined
  /** ovn-northd made its `Port_Binding`. */
  readonly northd?: number | undefined
  /** Its converge step had reported Configuring (`attach:status-configuring`). */
  readonly signalled?: number | undefined
  /** The agent took its `configure`. */
  readonly agentTook?: number | undefined
  /** The chassis bound the port and marked it up; the agent acks. */
  readonly bound?: number | undefined
  /** Its await step, woken by the ack, had read the ack (`attach:acked`). */
  readonly resumed?: number | undefined
  /** host.attach completed: the host is Ready. */
  readonly ready?: number | undefined
}

type Moment = keyof AttachMoments

/**
 * The steps the attach bench reports (`step_<name>_p50_ms` / `_p95_ms`), in the order an
 * attach goes through them, each from the latest of its `after` moments to its `to`. After
 * the NB commit two paths run side by side (ovn-northd makes the `Port_Binding`; the
 * controller sends the agent its `configure`); the chassis binds once both are there. Per
 * attach, `api + queue + converge + apply + max(northd, signal + agent_job) + sb_bind +
 * wake + ready` is the whole request -> Ready.
 */
export const ATTACH_STEPS = [
  {
    name: 'api',
    after: ['put'],
    to: 'accepted',
    what: 'applyHost -> spec stored and host.attach queued',
  },
  {
    name: 'queue',
    after: ['accepted'],
    to: 'started',
    what: 'queued -> a worker takes host.attach',
  },
  {
    name: 'converge',
    after: ['started'],
    to: 'applying',
    what: "host.attach's converge step up to its group apply (lock, reads, the DPU's other groups, addresses)",
  },
  {
    name: 'apply',
    after: ['applying'],
    to: 'committed',
    what: 'the group apply: waiting for the commit pace (and applies before it), then the NB commit that inserted the host port',
  },
  {
    name: 'northd',
    after: ['committed'],
    to: 'northd',
    what: 'NB commit -> its Port_Binding in the SB (ovn-northd)',
  },
  {
    name: 'signal',
    after: ['committed'],
    to: 'signalled',
    what: 'NB commit -> Configuring written (beside northd)',
  },
  {
    name: 'agent_job',
    after: ['signalled'],
    to: 'agentTook',
    what: 'Configuring written -> configure added and taken by the agent (beside northd)',
  },
  {
    name: 'sb_bind',
    after: ['northd', 'agentTook'],
    to: 'bound',
    what: "the later of Port_Binding and configure -> bound to the DPU's chassis and up (FakeChassis' pass); the agent acks",
  },
  {
    name: 'wake',
    after: ['bound'],
    to: 'resumed',
    what: "the ack -> host.attach's await step has read it (the child watcher wakes it, a worker takes it, its reads)",
  },
  {
    name: 'ready',
    after: ['resumed'],
    to: 'ready',
    what: 'the ack read -> host.attach completed Ready (the SB checked, the status written, the job finished)',
  },
] as const satisfies readonly {
  name: string
  after: readonly Moment[]
  to: Moment
  what: string
}[]

/**
 * Each step's durations (ms) over the attaches that saw all its moments, p50 and p95. A
 * step whose end this process heard of before its start (a job taken before the client's
 * answer to its request was read) counts as 0.
 */
export function stepDurations(samples: readonly AttachMoments[]) {
  return ATTACH_STEPS.map((step) => {
    const durations = samples.flatMap((s) => {
      const after = step.after.flatMap((m) => s[m] ?? [])
      const to = s[step.to]
      if (to === undefined || after.length < step.after.length) return []
      return [Math.max(0, to - Math.max(...after))]
    })
    return { ...step, durations, p50: quantile(durations, 0.5), p95: quantile(durations, 0.95) }
  })
}

/** `api 3/12, queue 1/4, …` (p50/p95 ms of each step). */
export function describeSteps(steps: ReturnType<typeof stepDurations>): string {
  return steps
    .map((s) => `${s.name} ${Math.round(s.p50)}/${Math.round(s.p95)}`)
    .join(', ')
    .concat(' (p50/p95 ms)')
}

/** Moments per logical port, oldest first: an attach takes the first at or after its request. */
class Seen {
  readonly #at = new Map<string, number[]>()

  add(key: string, at = performance.now()): void {
    const list = this.#at.get(key)
    if (list) list.push(at)
    else this.#at.set(key, [at])
  }

  firstAfter(key: string, since: number): number | undefined {
    return this.#at.get(key)?.find((t) => t >= since)
  }
}

/**
 * Follows centrals' NB and SB (one shared, or each group's own): when each host port was
 * committed and got its Port_Binding. Logical port names carry their group, so one watch
 * serves every central.
 */
export class CentralWatch {
  readonly #committed = new Seen()
  readonly #northd = new Seen()
  readonly #clients: OvsdbClient[] = []
  readonly #monitors: MonitorHandle[] = []

  readonly #followed = new Set<string>()

  /** Follows every one of `centrals` (NB and SB as the controller reaches them). */
  static async start(
    centrals: readonly { readonly nb: string; readonly sb: string }[],
  ): Promise<CentralWatch> {
    const watch = new CentralWatch()
    try {
      await watch.follow(centrals)
    } catch (error) {
      await watch.stop()
      throw error
    }
    return watch
  }

  /**
   * Follows those of `centrals` it does not follow yet (a central per group starts with its
   * group's first attach): from now on, since what a central held before is no moment.
   */
  async follow(centrals: readonly { readonly nb: string; readonly sb: string }[]): Promise<void> {
    for (const central of centrals) {
      if (this.#followed.has(central.nb)) continue
      this.#followed.add(central.nb)
      await this.#follow(central.nb, NB.name, { Logical_Switch_Port: { columns: ['name'] } }, (u) =>
        this.#nb(u),
      )
      await this.#follow(
        central.sb,
        SB.name,
        { Port_Binding: { columns: ['logical_port'] } },
        (u) => this.#sb(u),
      )
    }
  }

  async #follow(
    remote: string,
    db: string,
    requests: Parameters<OvsdbClient['monitor']>[1],
    handler: (updates: TableUpdates) => void,
  ): Promise<void> {
    const client = await OvsdbClient.connect(remote)
    this.#clients.push(client)
    // Not the rows already there (`reset`: the first call, and all again after a reconnect).
    this.#monitors.push(
      await client.monitor(db, requests, (updates, reset) => {
        if (!reset) handler(updates)
      }),
    )
  }

  #nb(updates: TableUpdates): void {
    for (const change of Object.values(updates.Logical_Switch_Port ?? {})) {
      if (change.old || !change.new) continue
      this.#committed.add(NB.decodeRow('Logical_Switch_Port', change.new).name)
    }
  }

  #sb(updates: TableUpdates): void {
    for (const change of Object.values(updates.Port_Binding ?? {})) {
      if (change.old || !change.new) continue
      this.#northd.add(SB.decodeRow('Port_Binding', change.new).logical_port)
    }
  }

  /** One host's moments: what the round saw, the central's, its job's and its agent's. */
  moments(
    host: RoundMoments,
    p: Pick<BenchPipeline, 'agentMoments' | 'checkpoints'>,
  ): AttachMoments {
    const port = topologyNames.hostPort(host.group, host.host)
    const agent = p.agentMoments.get(port)
    const job = p.checkpoints.get(host.host)
    return {
      put: host.put,
      accepted: host.accepted,
      started: host.started,
      applying: job?.get('attach:allocated'),
      committed: this.#committed.firstAfter(port, host.put),
      northd: this.#northd.firstAfter(port, host.put),
      signalled: job?.get('attach:status-configuring'),
      agentTook: agent?.took,
      bound: agent?.bound,
      resumed: job?.get('attach:acked'),
      ready: host.ready,
    }
  }

  async stop(): Promise<void> {
    for (const m of this.#monitors.splice(0)) await m.cancel().catch(() => undefined)
    for (const c of this.#clients.splice(0)) await c.close().catch(() => undefined)
  }
}

/**
 * Where a lab attach's time goes: when each step of it happened, read from what the system
 * records anyway, not polled for.
 *
 * - the HTTP API's answer to the PUT (202: the spec stored and its job queued);
 * - the group's NB, SB and every DPU's OVS database, followed by OVSDB monitors (each
 *   change is pushed when it is committed): the host's `Logical_Switch_Port` inserted (the
 *   GroupApplier commit that carried it), its `Port_Binding` made by ovn-northd, bound to
 *   the DPU's chassis by ovn-controller, the agent's host port in the DPU's OVS, and
 *   `ovn-installed` on it (ovn-controller's word that the port's flows are in: what the
 *   agent waits for and acks);
 * - the agent's `configure` job in BullMQ: when the agent took it (`processedOn`) and
 *   acked it (`finishedOn`);
 * - the host's events: the status write that turned it Ready.
 *
 * A monitored moment is when this process heard of the change: it trails the commit by
 * up to this process's event-loop delay (its p99 is in the step figures' notes).
 */
import { Job, Queue } from 'bullmq'
import * as v from 'valibot'
import type { LabCentral } from '../../infra/lab/hydrazine.ts'
import type { Lab, LabHost } from '../../infra/lab/lab.ts'
import { agentJobId, agentQueueName } from '../../lib/agent-protocol/index.ts'
import {
  Database,
  type MonitorHandle,
  type NbTables,
  nbSchema,
  OvsdbClient,
  type OvsTables,
  ovsSchema,
  type SbTables,
  sbSchema,
  type TableUpdates,
  topologyNames,
} from '../../lib/ovn/index.ts'
import { createRedis, type RedisClient } from '../../lib/redis/connection.ts'
import { now } from './lab-probes.ts'
import { quantile } from './report.ts'

const NB = new Database<NbTables>(nbSchema)
const SB = new Database<SbTables>(sbSchema)
const OVS = new Database<OvsTables>(ovsSchema)

/**
 * When the controller wrote host `name` Ready (its `Ready` event) after `put`, the last
 * such write; undefined when none is recorded.
 */
export async function readyEventAt(
  lab: Pick<Lab, 'api'>,
  name: string,
  put: number,
): Promise<number | undefined> {
  const events = v.safeParse(
    Events,
    (await lab.api('GET', `/v1/managed-resources/${name}/events`)).body,
  )
  return (events.success ? events.output.items : [])
    .map((e) => ({ reason: e.reason, at: Date.parse(e.at) }))
    .filter((e) => e.reason === 'Ready' && e.at >= Math.floor(put))
    .at(-1)?.at
}

/** When one host's attach reached each point (wall-clock ms); undefined when never seen. */
export interface AttachMoments {
  readonly host: string
  /** The bench sent the PUT. */
  readonly put: number
  /** The API answered it: the spec stored and the attach queued. */
  readonly accepted: number | undefined
  /** The NB commit that inserted the host's logical switch port. */
  readonly committed: number | undefined
  /** ovn-northd made its `Port_Binding` (the SB has it). */
  readonly northd: number | undefined
  /** The agent took its `configure` job. */
  readonly agentTook: number | undefined
  /** The agent's host port for it is in the DPU's OVS. */
  readonly plugged: number | undefined
  /** ovn-controller bound the `Port_Binding` to the DPU's chassis. */
  readonly bound: number | undefined
  /** ovn-controller set `ovn-installed` on the host port: its flows are in. */
  readonly installed: number | undefined
  /** The agent acked its `configure`. */
  readonly acked: number | undefined
  /** The host's status turned Ready (its `Ready` event). */
  readonly ready: number | undefined
}

type Moment = Exclude<keyof AttachMoments, 'host' | 'put'>

/**
 * The steps the lab bench reports (`lab_step_<name>_p50_ms` / `_p95_ms`), in the order an
 * attach goes through them, each from the latest of its `after` moments to its `to`. After
 * the NB commit two paths run side by side: ovn-northd makes the `Port_Binding`, while the
 * controller sends the agent its `configure` and the agent plugs the host port;
 * ovn-controller binds once both are there. Per attach, `api + nb_commit + max(northd,
 * agent_job + agent_port) + sb_bind + flows_installed + ack + ready` is the whole
 * PUT -> Ready. `whose` says whose work a step is: Hydrazine's (its API,
 * controller and agent) or OVN's (ovn-northd, ovn-controller).
 */
export const ATTACH_STEPS = [
  { name: 'api', after: ['put'], to: 'accepted', whose: 'Hydrazine', what: 'PUT -> 202' },
  {
    name: 'nb_commit',
    after: ['accepted'],
    to: 'committed',
    whose: 'Hydrazine',
    what: '202 -> the NB commit that inserted the host port (job queue, attach steps, commit pace)',
  },
  {
    name: 'northd',
    after: ['committed'],
    to: 'northd',
    whose: 'OVN',
    what: 'NB commit -> its Port_Binding in the SB (ovn-northd)',
  },
  {
    name: 'agent_job',
    after: ['committed'],
    to: 'agentTook',
    whose: 'Hydrazine',
    what: 'NB commit -> the agent takes its configure job (status writes, the job queued and picked up), beside northd',
  },
  {
    name: 'agent_port',
    after: ['agentTook'],
    to: 'plugged',
    whose: 'Hydrazine',
    what: "the agent takes the job -> its host port in the DPU's OVS",
  },
  {
    name: 'sb_bind',
    after: ['northd', 'plugged'],
    to: 'bound',
    whose: 'OVN',
    what: "the later of Port_Binding and host port -> bound to the DPU's chassis (ovn-controller)",
  },
  {
    name: 'flows_installed',
    after: ['bound'],
    to: 'installed',
    whose: 'OVN',
    what: 'bound -> ovn-installed on the host port (ovn-controller)',
  },
  {
    name: 'ack',
    after: ['installed'],
    to: 'acked',
    whose: 'Hydrazine',
    what: "ovn-installed -> the agent's configure ack",
  },
  {
    name: 'ready',
    after: ['acked'],
    to: 'ready',
    whose: 'Hydrazine',
    what: "the ack -> the host's status Ready",
  },
] as const satisfies readonly {
  name: string
  after: readonly (Moment | 'put')[]
  to: Moment
  whose: 'Hydrazine' | 'OVN'
  what: string
}[]

/** Each step's durations (ms) over the attaches that saw all its moments, p50 and p95. */
export function stepDurations(samples: readonly AttachMoments[]) {
  return ATTACH_STEPS.map((step) => {
    const durations = samples.flatMap((s) => {
      const after = step.after.flatMap((m) => s[m] ?? [])
      const to = s[step.to]
      return to === undefined || after.length < step.after.length ? [] : [to - Math.max(...after)]
    })
    return { ...step, durations, p50: quantile(durations, 0.5), p95: quantile(durations, 0.95) }
  })
}

/**
 * The `count` slowest attaches (PUT -> Ready), one line each with every step's duration, for
 * the bench's stderr: the tail of the Ready figures, explained attach by attach.
 *
 * @example slowestAttaches(moments, 1) // ['h3-0 4210 ms: api 31, nb_commit 212, …']
 */
export function slowestAttaches(samples: readonly AttachMoments[], count: number): string[] {
  const total = (s: AttachMoments) =>
    s.ready === undefined ? Number.POSITIVE_INFINITY : s.ready - s.put
  return [...samples]
    .sort((a, b) => total(b) - total(a))
    .slice(0, count)
    .map((s) => {
      const steps = stepDurations([s])
        .map(
          (step) =>
            `${step.name} ${step.durations[0] === undefined ? '-' : Math.round(step.durations[0])}`,
        )
        .join(', ')
      const ready = Number.isFinite(total(s)) ? `${Math.round(total(s))} ms` : 'never Ready'
      return `${s.host} ${ready}: ${steps}`
    })
}

/** Moments per logical port, oldest first: an attach takes the first at or after its PUT. */
class Seen {
  readonly #at = new Map<string, number[]>()

  add(key: string, at = now()): void {
    const list = this.#at.get(key)
    if (list) list.push(at)
    else this.#at.set(key, [at])
  }

  firstAfter(key: string, since: number): number | undefined {
    return this.#at.get(key)?.find((t) => t >= since)
  }
}

const Events = v.object({
  items: v.array(v.object({ at: v.string(), reason: v.string() })),
})
const Host = v.object({
  specVersion: v.number(),
  spec: v.object({ dpu: v.object({ id: v.string() }) }),
  status: v.object({ attempt: v.optional(v.number()) }),
})

/**
 * Follows one group's attaches in the lab: `start` opens the monitors, `moments` puts
 * together one host's once it is Ready, `stop` closes everything.
 */
export class AttachWatch {
  readonly #committed = new Seen()
  readonly #northd = new Seen()
  readonly #bound = new Seen()
  readonly #plugged = new Seen()
  readonly #installed = new Seen()
  readonly #clients: OvsdbClient[] = []
  readonly #monitors: MonitorHandle[] = []
  readonly #queues = new Map<string, Queue>()
  #redis: RedisClient | undefined
  /** Following the group's NB and SB, from when its central runs (`#followCentral`). */
  #central: Promise<void> | undefined
  #stopped = false

  private constructor(
    private readonly lab: Lab,
    private readonly group: string,
  ) {}

  static async start(lab: Lab, group: string): Promise<AttachWatch> {
    const watch = new AttachWatch(lab, group)
    try {
      for (const dpu of lab.dpus) {
        await watch.#follow(
          dpu.sim.ovsDb,
          OVS.name,
          { Interface: { columns: ['external_ids'] } },
          watch.#ovs(),
        )
      }
    } catch (error) {
      await watch.stop()
      throw error
    }
    // The group's central starts with its first host (centrals on demand): its NB and SB
    // are followed from the moment it answers. Rows already there arrive as the monitor's
    // first update, so the first hosts' `committed` and `northd` are at most one look late.
    watch.#central = watch.#followCentral()
    return watch
  }

  /** Follows the group's NB and SB once its central runs (looks every 20 ms, up to 120 s). */
  async #followCentral(): Promise<void> {
    let central: LabCentral | undefined
    for (const began = Date.now(); !central && !this.#stopped; ) {
      central = await this.lab.central(this.group).catch(() => undefined)
      if (central) break
      if (Date.now() - began > 120_000) throw new Error(`group ${this.group} runs no central`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    if (!central || this.#stopped) return
    await this.#follow(central.nb, NB.name, { Logical_Switch_Port: { columns: ['name'] } }, (u) =>
      this.#nb(u),
    )
    await this.#follow(
      `unix:${central.dir}/sb.sock`,
      SB.name,
      {
        Chassis: { columns: ['name'] },
        Port_Binding: { columns: ['logical_port', 'chassis'] },
      },
      this.#sb(),
    )
  }

  async #follow(
    remote: string,
    db: string,
    requests: Parameters<OvsdbClient['monitor']>[1],
    handler: (updates: TableUpdates) => void,
  ): Promise<void> {
    const client = await OvsdbClient.connect(remote)
    this.#clients.push(client)
    this.#monitors.push(await client.monitor(db, requests, (updates) => handler(updates)))
  }

  /** A logical switch port inserted. */
  #nb(updates: TableUpdates): void {
    for (const change of Object.values(updates.Logical_Switch_Port ?? {})) {
      if (change.old || !change.new) continue
      this.#committed.add(NB.decodeRow('Logical_Switch_Port', change.new).name)
    }
  }

  /** A `Port_Binding` inserted; one bound to a chassis it was not bound to. */
  #sb(): (updates: TableUpdates) => void {
    const chassis = new Map<string, string>()
    return (updates) => {
      for (const [uuid, change] of Object.entries(updates.Chassis ?? {})) {
        if (change.new) chassis.set(uuid, SB.decodeRow('Chassis', change.new).name)
      }
      for (const change of Object.values(updates.Port_Binding ?? {})) {
        if (!change.new) continue
        const row = SB.decodeRow('Port_Binding', change.new)
        if (!change.old) this.#northd.add(row.logical_port)
        // `old` holds the columns that changed: a new chassis, or none before (an insert).
        const rebound = !change.old || 'chassis' in change.old
        if (rebound && row.chassis !== null) {
          this.#bound.add(`${row.logical_port}@${chassis.get(row.chassis) ?? row.chassis}`)
        }
      }
    }
  }

  /** An Interface inserted for a logical port; `ovn-installed` set on one. */
  #ovs(): (updates: TableUpdates) => void {
    const installed = new Set<string>()
    return (updates) => {
      for (const [uuid, change] of Object.entries(updates.Interface ?? {})) {
        if (!change.new) {
          installed.delete(uuid)
          continue
        }
        const ids = OVS.decodeRow('Interface', change.new).external_ids
        const port = ids['iface-id']
        if (!port) continue
        if (!change.old) this.#plugged.add(port)
        if (ids['ovn-installed'] === 'true' && !installed.has(uuid)) {
          installed.add(uuid)
          this.#installed.add(port)
        }
      }
    }
  }

  /** The moments of `host`'s attach whose PUT went at `put` and was answered at `accepted`. */
  async moments(host: LabHost, put: number, accepted: number): Promise<AttachMoments> {
    const port = topologyNames.hostPort(this.group, host.name)
    const found = v.safeParse(
      Host,
      (await this.lab.api('GET', `/v1/managed-resources/${host.name}`)).body,
    )
    const job = found.success ? await this.#configureJob(host.name, found.output) : undefined
    const readyEvent = await readyEventAt(this.lab, host.name, put)
    return {
      host: host.name,
      put,
      accepted,
      committed: this.#committed.firstAfter(port, put),
      northd: this.#northd.firstAfter(port, put),
      agentTook: job?.processedOn,
      plugged: this.#plugged.firstAfter(port, put),
      bound: this.#bound.firstAfter(`${port}@${host.dpu}`, put),
      installed: this.#installed.firstAfter(port, put),
      acked: job?.finishedOn,
      ready: readyEvent,
    }
  }

  /**
   * When the agent took the host's current `configure` job and acked it (any group's host:
   * the Fabric rounds read their agent's share of an attach from it).
   */
  async agentJob(host: LabHost): Promise<{ took?: number; acked?: number }> {
    const found = v.safeParse(
      Host,
      (await this.lab.api('GET', `/v1/managed-resources/${host.name}`)).body,
    )
    const job = found.success ? await this.#configureJob(host.name, found.output) : undefined
    return {
      ...(job?.processedOn ? { took: job.processedOn } : {}),
      ...(job?.finishedOn ? { acked: job.finishedOn } : {}),
    }
  }

  /** The host's `configure` job on its DPU's queue, at its spec version and attempt. */
  async #configureJob(host: string, found: v.InferOutput<typeof Host>): Promise<Job | undefined> {
    const dpuId = found.spec.dpu.id
    const name = agentQueueName(dpuId)
    let queue = this.#queues.get(name)
    if (!queue) {
      if (!this.#redis) {
        this.#redis = createRedis(this.lab.redis, { maxRetriesPerRequest: null })
        // The lab's Redis goes before the bench ends (a signal stops the lab's daemons too):
        // a read then fails where it is made; an unheard 'error' event would end the process.
        this.#redis.on('error', () => {})
      }
      queue = new Queue(name, { connection: this.#redis })
      queue.on('error', () => {})
      this.#queues.set(name, queue)
    }
    const id = agentJobId(
      'configure',
      { dpuId, host: { name: host }, specVersion: found.specVersion },
      found.status.attempt ?? 1,
    )
    return Job.fromId(queue, id)
  }

  async stop(): Promise<void> {
    this.#stopped = true
    await this.#central?.catch(() => undefined)
    for (const m of this.#monitors.splice(0)) await m.cancel().catch(() => undefined)
    for (const c of this.#clients.splice(0)) await c.close().catch(() => undefined)
    for (const q of this.#queues.values()) await q.close().catch(() => undefined)
    this.#queues.clear()
    await this.#redis?.quit().catch(() => undefined)
  }
}

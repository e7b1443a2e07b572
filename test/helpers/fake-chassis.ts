/**
 * What `ovn-controller` does in the Southbound when a DPU binds or releases a port, for
 * tests whose agents are in-process stand-ins: a `Chassis` row named after the DPU, and
 * the logical port's `Port_Binding.chassis` set to it or cleared. The controller believes
 * a DPU's ack only when the SB agrees, so a stand-in agent must leave the same trace.
 *
 * Like ovn-controller, it follows the SB's `Port_Binding`s with a monitor and binds a port
 * when northd has made its row, rather than asking the SB again and again: hundreds of
 * stand-ins polling one SB would load it (and the machine) as no DPU does. And it writes
 * what ovn-controller writes, as often: a DPU's chassis has its `Chassis_Private` row, and
 * the ports asked for while one pass runs are claimed together in the next, in one SB
 * transaction per DPU (`chassis`), followed by a second one marking them `up` (the flows
 * are in), so the SB and northd see the load real DPUs give them.
 */
import { createHash } from 'node:crypto'
import {
  Database,
  OvsdbClient,
  OvsdbConstraintViolation,
  RemotePool,
  type SbTables,
  sbSchema,
  type TableUpdates,
} from '../../lib/ovn/index.ts'

const SB = new Database<SbTables>(sbSchema)

/** How long `bind` waits for northd to make a port's `Port_Binding`. */
const BIND_WAIT_MS = 60_000

/** One SB connection and the `Port_Binding`s it follows. */
interface Southbound {
  readonly client: OvsdbClient
  readonly bindings: PortBindings
}

export class FakeChassis {
  readonly #reach: (remote: string) => Promise<string>

  /**
   * `reach`: where to write what a DPU would write in the SB at `remote` (default: there).
   * A TLS SB, which admits only chassis certificates, is written through the central's
   * own socket: what lands in it is the same.
   */
  constructor(reach: (remote: string) => Promise<string> = async (remote) => remote) {
    this.#reach = reach
  }

  readonly #southbounds = new RemotePool<Southbound>(
    async (remote) => {
      const client = await OvsdbClient.connect(await this.#reach(remote))
      const bindings = new PortBindings()
      try {
        await client.monitor(
          SB.name,
          { Port_Binding: { columns: ['logical_port'] } },
          (updates, reset) => bindings.update(updates, reset),
        )
      } catch (error) {
        await client.close()
        throw error
      }
      return { client, bindings }
    },
    async ({ client, bindings }) => {
      bindings.close()
      await client.close()
    },
  )
  /** Where each (DPU, logical port) was bound, to release it there. */
  readonly #boundIn = new Map<string, string>()
  /** Per SB and DPU: the ports asked for since its last pass began, and that pass. */
  readonly #passes = new Map<string, { pending: Claim[]; running: Promise<void> | undefined }>()

  /**
   * Binds `logicalPort` to the DPU's chassis once northd has made its `Port_Binding`, in
   * the DPU's next pass (with every port asked for meanwhile), and marks it `up`; gives up
   * silently after a minute (the controller then sees no binding). Rejects when the SB
   * could not be written (a central that went away): the stand-in agent's job then fails
   * and is retried, as a real agent's would, instead of acking a binding nobody made.
   * Rejects at once when `signal` aborts (its agent stopped mid-job: the job is retried).
   */
  bind(remote: string, dpuId: string, logicalPort: string, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((done, fail) => {
      if (signal?.aborted) return fail(signal.reason)
      const onAbort = () => fail(signal?.reason)
      signal?.addEventListener('abort', onAbort, { once: true })
      // Settled either way, the claim lets go of its agent's signal (one signal per agent,
      // a claim per job: kept listeners would pile up for the agent's life).
      const settled = () => signal?.removeEventListener('abort', onAbort)
      const deadline = Date.now() + BIND_WAIT_MS
      this.#claim(remote, dpuId, {
        port: logicalPort,
        deadline,
        done: () => {
          settled()
          done()
        },
        fail: (error) => {
          settled()
          fail(error)
        },
      })
    })
  }

  /** Queues `claim` for the DPU's next pass, starting its loop when it is idle. */
  #claim(remote: string, dpuId: string, claim: Claim): void {
    const key = `${remote}\u0000${dpuId}`
    let state = this.#passes.get(key)
    if (!state) {
      state = { pending: [], running: undefined }
      this.#passes.set(key, state)
    }
    state.pending.push(claim)
    if (state.running) return
    const dpu = state
    // Like ovn-controller's main loop: each pass takes everything asked for so far.
    dpu.running = (async () => {
      while (dpu.pending.length > 0) {
        const claims = dpu.pending.splice(0)
        await this.#pass(remote, dpuId, claims).catch((error: unknown) => {
          for (const c of claims) c.fail(error)
        })
      }
      dpu.running = undefined
    })()
  }

  /**
   * One pass of a DPU: claims every port of `claims` whose `Port_Binding` northd has made,
   * then marks them up; a port without one yet joins a later pass once it has one (or is
   * given up at its deadline).
   */
  async #pass(remote: string, dpuId: string, claims: readonly Claim[]): Promise<void> {
    const chassis = await this.#ensureChassis(remote, dpuId)
    const { client, bindings } = await this.#southbounds.get(remote)
    const ready: { claim: Claim; uuid: string }[] = []
    for (const claim of claims) {
      const uuid = bindings.known(claim.port)
      if (uuid !== undefined) ready.push({ claim, uuid })
      else if (Date.now() > claim.deadline) claim.done()
      else {
        void bindings.uuidOf(claim.port, claim.deadline).then((found) => {
          if (found === undefined) claim.done()
          else this.#claim(remote, dpuId, claim)
        })
      }
    }
    if (ready.length === 0) return
    const claimed = await client.transact(
      SB.name,
      ready.map(({ uuid }) => SB.update('Port_Binding', [['_uuid', '==', uuid]], { chassis })),
    )
    const bound = ready.filter((_, i) => (claimed[i]?.count ?? 0) > 0)
    if (bound.length > 0) {
      await client.transact(
        SB.name,
        bound.map(({ uuid }) => SB.update('Port_Binding', [['_uuid', '==', uuid]], { up: true })),
      )
    }
    for (const { claim } of bound) {
      this.#boundIn.set(`${dpuId}/${claim.port}`, remote)
      claim.done()
    }
    // A row that went (and may come back with another uuid) before the monitor said so.
    for (const { claim } of ready.filter((_, i) => (claimed[i]?.count ?? 0) === 0)) {
      if (Date.now() > claim.deadline) claim.done()
      else setTimeout(() => this.#claim(remote, dpuId, claim), 100)
    }
  }

  /** Releases `logicalPort` when the DPU's chassis holds it (as ovn-controller does). */
  async release(dpuId: string, logicalPort: string): Promise<void> {
    const remote = this.#boundIn.get(`${dpuId}/${logicalPort}`)
    if (!remote) return
    const chassis = await this.#ensureChassis(remote, dpuId)
    const { client } = await this.#southbounds.get(remote)
    await client.transact(SB.name, [
      SB.update(
        'Port_Binding',
        [
          ['logical_port', '==', logicalPort],
          ['chassis', '==', chassis],
        ],
        { chassis: null, up: false },
      ),
    ])
    this.#boundIn.delete(`${dpuId}/${logicalPort}`)
  }

  close(): Promise<void> {
    return this.#southbounds.close()
  }

  /**
   * The uuid of the DPU's `Chassis` row in that SB, made when missing (with its `Encap`):
   * looked up every time, since the controller removes the chassis from a group's SB once
   * the DPU serves another group.
   */
  async #ensureChassis(remote: string, dpuId: string): Promise<string> {
    const { client } = await this.#southbounds.get(remote)
    const find = async () => {
      const [rows] = await client.transact(SB.name, [
        SB.select('Chassis', [['name', '==', dpuId]], ['_uuid']),
      ])
      return SB.decodeRows('Chassis', rows?.rows)[0]?._uuid
    }
    const existing = await find()
    if (existing) return existing
    try {
      const [, inserted] = await client.transact(SB.name, [
        SB.insert('Encap', { type: 'geneve', ip: encapIpOf(dpuId), chassis_name: dpuId }, 'encap'),
        SB.insert('Chassis', { name: dpuId, hostname: dpuId, encaps: ['encap'] }, 'chassis'),
        SB.delete('Chassis_Private', [['name', '==', dpuId]]),
        SB.insert('Chassis_Private', { name: dpuId, chassis: 'chassis' }),
      ])
      return String(inserted?.uuid?.[1])
    } catch (error) {
      // Another test process made it first.
      const made = error instanceof OvsdbConstraintViolation ? await find() : undefined
      if (made) return made
      throw error
    }
  }
}

/** A port a DPU was asked to bind, and who waits for it. */
interface Claim {
  readonly port: string
  /** When it is given up (the controller then sees no binding). */
  readonly deadline: number
  readonly done: () => void
  /** The SB could not be written: the claim's bind rejects with `error`. */
  readonly fail: (error: unknown) => void
}

/** `Port_Binding` uuids by logical port, as a monitor of one SB reports them. */
class PortBindings {
  readonly #uuids = new Map<string, string>()
  /** Who waits for a port's row to appear. */
  readonly #waiters = new Map<string, Set<() => void>>()

  update(updates: TableUpdates, reset: boolean): void {
    if (reset) this.#uuids.clear()
    for (const [uuid, { old, new: row }] of Object.entries(updates.Port_Binding ?? {})) {
      const port = row?.logical_port ?? old?.logical_port
      if (typeof port !== 'string') continue
      if (!row) {
        if (this.#uuids.get(port) === uuid) this.#uuids.delete(port)
        continue
      }
      this.#uuids.set(port, uuid)
      const waiters = this.#waiters.get(port)
      this.#waiters.delete(port)
      for (const wake of waiters ?? []) wake()
    }
  }

  /** The port's `Port_Binding` uuid as known now. */
  known(port: string): string | undefined {
    return this.#uuids.get(port)
  }

  /** The port's `Port_Binding` uuid, once it has one; undefined past `deadline`. */
  async uuidOf(port: string, deadline: number): Promise<string | undefined> {
    const known = this.#uuids.get(port)
    if (known !== undefined || Date.now() > deadline) return known
    await new Promise<void>((resolve) => {
      const waiters = this.#waiters.get(port) ?? new Set()
      this.#waiters.set(port, waiters)
      const done = () => {
        clearTimeout(timer)
        waiters.delete(done)
        if (waiters.size === 0 && this.#waiters.get(port) === waiters) this.#waiters.delete(port)
        resolve()
      }
      const timer = setTimeout(done, Math.max(0, deadline - Date.now()))
      waiters.add(done)
    })
    return this.#uuids.get(port)
  }

  /** Lets every waiter go (its `uuidOf` answers what is known). */
  close(): void {
    const waiters = [...this.#waiters.values()].flatMap((set) => [...set])
    this.#waiters.clear()
    for (const wake of waiters) wake()
  }
}

/** A loopback address of the DPU's own (the SB holds one encap per type and address). */
function encapIpOf(dpuId: string): string {
  const [a, b, c] = createHash('sha256').update(dpuId).digest()
  return `127.${a}.${b}.${c}`
}

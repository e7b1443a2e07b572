/**
 * What the Southbound says about a logical port: the chassis `ovn-controller` bound it
 * to. The controller checks a DPU's acks against it — a DPU that says "bound" or
 * "unbound" is believed only when the SB agrees — so it reads the SB with its own
 * privileged connection (an embedded central's unix socket), never a DPU's.
 */
import { OvsdbClient, type OvsdbClientOptions } from './client.ts'
import { Database } from './database.ts'
import { RemotePool } from './pool.ts'
import type { TableUpdates } from './protocol.ts'
import type { SbTables } from './schema/sb.generated.ts'
import { sbSchema } from './schema/sb.generated.ts'

const SB = new Database<SbTables>(sbSchema)

/** What ovn-northd must have done for a commit to count as processed (`SbPool.settled`). */
export interface PortsExpected {
  /** Logical switch ports the SB must have a `Port_Binding` for. */
  readonly added: readonly string[]
  /** Logical switch ports whose `Port_Binding` must be gone. */
  readonly removed: readonly string[]
}

interface Waiter {
  readonly added: ReadonlySet<string>
  readonly removed: ReadonlySet<string>
  readonly done: (settled: boolean) => void
}

/**
 * The SB's `Port_Binding` names, followed by a monitor of that one column: which logical
 * ports ovn-northd has made a binding row for. Waiters are told when theirs are all there
 * (and those they expect gone are gone).
 */
class PortBindingWatch {
  readonly #names = new Map<string, string>()
  readonly #present = new Map<string, number>()
  #waiters: Waiter[] = []

  static async start(client: OvsdbClient): Promise<PortBindingWatch> {
    const watch = new PortBindingWatch()
    await client.monitor(
      SB.name,
      { Port_Binding: { columns: ['logical_port'] } },
      (updates, reset) => watch.#apply(updates, reset),
    )
    return watch
  }

  /** Resolves true once `expected` holds, false when `timeoutMs` passes first. */
  wait(expected: PortsExpected, timeoutMs: number): Promise<boolean> {
    const added = new Set(expected.added)
    const removed = new Set(expected.removed)
    if (this.#holds(added, removed)) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter)
        resolve(false)
      }, timeoutMs)
      const waiter: Waiter = {
        added,
        removed,
        done: (settled) => {
          clearTimeout(timer)
          resolve(settled)
        },
      }
      this.#waiters.push(waiter)
    })
  }

  /**
   * Answers every waiter false. The monitor is not cancelled: it ends with its connection,
   * which the pool closes next (often right after its central was released).
   */
  end(): void {
    for (const w of this.#waiters) w.done(false)
    this.#waiters = []
  }

  #holds(added: ReadonlySet<string>, removed: ReadonlySet<string>): boolean {
    for (const name of added) if (!this.#present.has(name)) return false
    for (const name of removed) if (this.#present.has(name)) return false
    return true
  }

  #apply(updates: TableUpdates, reset: boolean): void {
    if (reset) {
      this.#names.clear()
      this.#present.clear()
    }
    for (const [uuid, change] of Object.entries(updates.Port_Binding ?? {})) {
      const before = this.#names.get(uuid)
      if (before !== undefined) this.#count(before, -1)
      const name = change.new?.logical_port
      if (typeof name === 'string') {
        this.#names.set(uuid, name)
        this.#count(name, 1)
      } else this.#names.delete(uuid)
    }
    if (this.#waiters.length === 0) return
    const waiting: Waiter[] = []
    for (const w of this.#waiters) {
      if (this.#holds(w.added, w.removed)) w.done(true)
      else waiting.push(w)
    }
    this.#waiters = waiting
  }

  #count(name: string, by: 1 | -1): void {
    const n = (this.#present.get(name) ?? 0) + by
    if (n > 0) this.#present.set(name, n)
    else this.#present.delete(name)
  }
}

/**
 * SB connections, one per remote (a `RemotePool`, as `NbPool` is for NB).
 *
 * @example
 * const sb = new SbPool()
 * await sb.boundChassis('unix:/run/ovn/sb.sock', 'hz/g1/h1') // 'dpu-1', or null
 */
export class SbPool extends RemotePool<OvsdbClient> {
  readonly #watches = new Map<string, Promise<PortBindingWatch>>()

  constructor(options: OvsdbClientOptions = {}) {
    super(
      (remote) => OvsdbClient.connect(remote, options),
      (client) => client.close(),
    )
  }

  /**
   * Waits until ovn-northd has processed an NB commit that inserted `ports.added` and
   * deleted `ports.removed`: the SB has a `Port_Binding` for each added port and none for
   * the others. True when it has, false when `timeoutMs` passed first. The first call for
   * a remote starts a monitor of the SB's `Port_Binding` names, kept while the connection
   * is.
   *
   * @throws OvsdbConnectionError when the SB cannot be reached to start following it
   */
  async settled(remote: string, ports: PortsExpected, timeoutMs: number): Promise<boolean> {
    let watch = this.#watches.get(remote)
    if (!watch) {
      watch = this.get(remote).then((client) => PortBindingWatch.start(client))
      watch.catch(() => this.#watches.delete(remote))
      this.#watches.set(remote, watch)
    }
    return (await watch).wait(ports, timeoutMs)
  }

  override async drop(remote: string): Promise<void> {
    const watch = this.#watches.get(remote)
    this.#watches.delete(remote)
    await watch?.then((w) => w.end()).catch(() => undefined)
    await super.drop(remote)
  }

  /**
   * The name of the chassis the SB binds `logicalPort` to; null when the port has no
   * binding row or is bound nowhere.
   */
  async boundChassis(remote: string, logicalPort: string): Promise<string | null> {
    const client = await this.get(remote)
    const [bindings] = await client.transact(SB.name, [
      SB.select('Port_Binding', [['logical_port', '==', logicalPort]], ['chassis']),
    ])
    const chassis = SB.decodeRows('Port_Binding', bindings?.rows)[0]?.chassis ?? null
    if (chassis === null) return null
    const [rows] = await client.transact(SB.name, [
      SB.select('Chassis', [['_uuid', '==', chassis]], ['name']),
    ])
    return SB.decodeRows('Chassis', rows?.rows)[0]?.name ?? null
  }

  /**
   * Removes chassis `name` (its `Chassis` and `Chassis_Private` rows; its `Encap`s go with
   * it): it serves no host of this SB's group any more. True when there was one.
   */
  async removeChassis(remote: string, name: string): Promise<boolean> {
    const client = await this.get(remote)
    const [chassis] = await client.transact(SB.name, [
      SB.delete('Chassis', [['name', '==', name]]),
      SB.delete('Chassis_Private', [['name', '==', name]]),
    ])
    return (chassis?.count ?? 0) > 0
  }
}

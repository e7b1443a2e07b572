/**
 * What `ovn-controller` does in the Southbound when a DPU binds or releases a port, for
 * tests whose agents are in-process stand-ins: a `Chassis` row named after the DPU, and
 * the logical port's `Port_Binding.chassis` set to it or cleared. The controller believes
 * a DPU's ack only when the SB agrees, so a stand-in agent must leave the same trace.
 */
import { createHash } from 'node:crypto'
import {
  Database,
  OvsdbClient,
  OvsdbConstraintViolation,
  RemotePool,
  type SbTables,
  sbSchema,
} from '../../lib/ovn/index.ts'
import { eventually } from './processes.ts'

const SB = new Database<SbTables>(sbSchema)

export class FakeChassis {
  readonly #clients = new RemotePool<OvsdbClient>(
    (remote) => OvsdbClient.connect(remote),
    (client) => client.close(),
  )
  /** Where each (DPU, logical port) was bound, to release it there. */
  readonly #boundIn = new Map<string, string>()

  /** Binds `logicalPort` to the DPU's chassis once northd has made its `Port_Binding`. */
  async bind(remote: string, dpuId: string, logicalPort: string): Promise<void> {
    const chassis = await this.#ensureChassis(remote, dpuId)
    const client = await this.#clients.get(remote)
    await eventually(async () => {
      const [updated] = await client.transact(SB.name, [
        SB.update('Port_Binding', [['logical_port', '==', logicalPort]], { chassis }),
      ])
      return (updated?.count ?? 0) > 0
    }, 60_000)
    this.#boundIn.set(`${dpuId}/${logicalPort}`, remote)
  }

  /** Releases `logicalPort` when the DPU's chassis holds it (as ovn-controller does). */
  async release(dpuId: string, logicalPort: string): Promise<void> {
    const remote = this.#boundIn.get(`${dpuId}/${logicalPort}`)
    if (!remote) return
    const chassis = await this.#ensureChassis(remote, dpuId)
    const client = await this.#clients.get(remote)
    await client.transact(SB.name, [
      SB.update(
        'Port_Binding',
        [
          ['logical_port', '==', logicalPort],
          ['chassis', '==', chassis],
        ],
        { chassis: null },
      ),
    ])
    this.#boundIn.delete(`${dpuId}/${logicalPort}`)
  }

  close(): Promise<void> {
    return this.#clients.close()
  }

  /**
   * The uuid of the DPU's `Chassis` row in that SB, made when missing (with its `Encap`):
   * looked up every time, since the controller removes the chassis from a group's SB once
   * the DPU serves another group.
   */
  async #ensureChassis(remote: string, dpuId: string): Promise<string> {
    const client = await this.#clients.get(remote)
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
        SB.insert('Chassis', { name: dpuId, hostname: dpuId, encaps: ['encap'] }),
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

/** A loopback address of the DPU's own (the SB holds one encap per type and address). */
function encapIpOf(dpuId: string): string {
  const [a, b, c] = createHash('sha256').update(dpuId).digest()
  return `127.${a}.${b}.${c}`
}

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
  type SbTables,
  sbSchema,
} from '../../lib/ovn/index.ts'
import { eventually } from './processes.ts'

const SB = new Database<SbTables>(sbSchema)

export class FakeChassis {
  readonly #client: Promise<OvsdbClient>
  readonly #chassis = new Map<string, Promise<string>>()

  constructor(sbRemote: string) {
    this.#client = OvsdbClient.connect(sbRemote)
  }

  /** Binds `logicalPort` to the DPU's chassis once northd has made its `Port_Binding`. */
  async bind(dpuId: string, logicalPort: string): Promise<void> {
    const chassis = await this.#chassisOf(dpuId)
    const client = await this.#client
    await eventually(async () => {
      const [updated] = await client.transact(SB.name, [
        SB.update('Port_Binding', [['logical_port', '==', logicalPort]], { chassis }),
      ])
      return (updated?.count ?? 0) > 0
    }, 20_000)
  }

  /** Releases `logicalPort` when the DPU's chassis holds it (as ovn-controller does). */
  async release(dpuId: string, logicalPort: string): Promise<void> {
    const chassis = await this.#chassisOf(dpuId)
    const client = await this.#client
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
  }

  async close(): Promise<void> {
    await (await this.#client.catch(() => undefined))?.close()
  }

  /** The uuid of the DPU's `Chassis` row, made on first use (with its one `Encap`). */
  #chassisOf(dpuId: string): Promise<string> {
    let chassis = this.#chassis.get(dpuId)
    if (!chassis) {
      chassis = this.#ensureChassis(dpuId)
      this.#chassis.set(dpuId, chassis)
    }
    return chassis
  }

  async #ensureChassis(dpuId: string): Promise<string> {
    const client = await this.#client
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

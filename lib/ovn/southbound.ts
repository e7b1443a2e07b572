/**
 * What the Southbound says about a logical port: the chassis `ovn-controller` bound it
 * to. The controller checks a DPU's acks against it — a DPU that says "bound" or
 * "unbound" is believed only when the SB agrees — so it reads the SB with its own
 * privileged connection (an embedded central's unix socket), never a DPU's.
 */
import { OvsdbClient, type OvsdbClientOptions } from './client.ts'
import { Database } from './database.ts'
import { RemotePool } from './pool.ts'
import type { SbTables } from './schema/sb.generated.ts'
import { sbSchema } from './schema/sb.generated.ts'

const SB = new Database<SbTables>(sbSchema)

/**
 * SB connections, one per remote (a `RemotePool`, as `NbPool` is for NB).
 *
 * @example
 * const sb = new SbPool()
 * await sb.boundChassis('unix:/run/ovn/sb.sock', 'hz/g1/h1') // 'dpu-1', or null
 */
export class SbPool extends RemotePool<OvsdbClient> {
  constructor(options: OvsdbClientOptions = {}) {
    super(
      (remote) => OvsdbClient.connect(remote, options),
      (client) => client.close(),
    )
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

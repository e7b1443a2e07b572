/**
 * Whether a central's chassis encrypt the Geneve tunnels between them: OVN's
 * `NB_Global.ipsec`. With it true, ovn-northd sets `SB_Global.ipsec`, and each chassis'
 * ovn-controller names the remote chassis (`options:remote_name`) on every tunnel port,
 * which makes OVS take the tunnel as IPsec: `ovs-monitor-ipsec` negotiates an IPsec SA per
 * tunnel with the certificates in the DPU's `Open_vSwitch` `other_config`, and OVS accepts
 * on such a port only packets that IPsec decrypted (OVS's `IPSEC_MARK`), never cleartext
 * Geneve. The controller writes it into every central it connects to (`NbPool`'s
 * `prepare`), from `HYDRAZINE_GENEVE_IPSEC`.
 */
import type { OvsdbClient } from './client.ts'
import { Database } from './database.ts'
import { OvsdbConstraintViolation } from './errors.ts'
import { type NbTables, nbSchema } from './schema/nb.generated.ts'

const nb = new Database<NbTables>(nbSchema)

/**
 * Makes the NB's `NB_Global.ipsec` equal `on`; true when it changed. Inserts the row when
 * the NB has none yet (ovn-northd makes it when it first starts; if it made it in the
 * meantime, the insert is refused and the row written instead).
 *
 * @example await setGeneveIpsec(client, true) // every tunnel of the central is IPsec
 */
export async function setGeneveIpsec(client: OvsdbClient, on: boolean): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const [selected] = await client.transact(nb.name, [nb.select('NB_Global', [])])
    const row = nb.decodeRows('NB_Global', selected?.rows)[0]
    if (row?.ipsec === on) return false
    try {
      await client.transact(nb.name, [
        row
          ? nb.update('NB_Global', [['_uuid', '==', row._uuid]], { ipsec: on })
          : nb.insert('NB_Global', { ipsec: on }),
      ])
      return true
    } catch (error) {
      // NB_Global holds at most one row: ovn-northd inserted it between the select and ours.
      if (!(error instanceof OvsdbConstraintViolation) || row || attempt > 1) throw error
    }
  }
}

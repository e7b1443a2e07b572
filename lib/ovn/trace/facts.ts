/**
 * What a trace needs to know of one central, read (never written) from its databases:
 * the Southbound's port bindings — which datapath a port is on, its MAC and addresses,
 * the chassis that bound it — and a gateway router's NAT rules from the Northbound.
 */
import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'
import { nbSchema } from '../schema/nb.generated.ts'
import type { SbTables } from '../schema/sb.generated.ts'
import { sbSchema } from '../schema/sb.generated.ts'
import { DPU_KEY, OWNER_KEY, ownerOf } from '../topology/names.ts'
import { bindingAddresses } from './flow.ts'
import type { NatRule } from './nat.ts'

const SB = new Database<SbTables>(sbSchema)
const NB = new Database<NbTables>(nbSchema)

/** A logical port as the Southbound binds it. */
export interface BoundPort {
  readonly name: string
  /** The name of its datapath (a logical switch or router). */
  readonly datapath: string
  /** Its SB type: `` (a VIF), `patch`, `l3gateway`, `localnet`, … */
  readonly type: string
  /** Its MAC and addresses, from each `mac` entry naming a MAC. */
  readonly addresses: readonly { readonly mac: string; readonly ips: readonly string[] }[]
  /** The chassis it is bound to; null when no chassis claims it. */
  readonly chassis: string | null
}

/**
 * The reads of one central.
 *
 * @example
 * const facts = new TraceFacts({ nb, sb })
 * await facts.port('hz/g/lr-ls') // { datapath: 'hz/g/lr', addresses: [{ mac: '0a:…', ips: ['10.0.0.1'] }], … }
 */
export class TraceFacts {
  readonly #nb: OvsdbClient
  readonly #sb: OvsdbClient

  constructor(clients: { readonly nb: OvsdbClient; readonly sb: OvsdbClient }) {
    this.#nb = clients.nb
    this.#sb = clients.sb
  }

  /** The port's binding; undefined while northd has made none. */
  async port(name: string): Promise<BoundPort | undefined> {
    const [found] = await this.#sb.transact(SB.name, [
      SB.select(
        'Port_Binding',
        [['logical_port', '==', name]],
        ['datapath', 'type', 'mac', 'chassis'],
      ),
    ])
    const row = SB.decodeRows('Port_Binding', found?.rows)[0]
    if (!row) return undefined
    const [datapaths, chassis] = await this.#sb.transact(SB.name, [
      SB.select('Datapath_Binding', [['_uuid', '==', row.datapath]], ['external_ids']),
      SB.select(
        'Chassis',
        [['_uuid', '==', row.chassis ?? '00000000-0000-0000-0000-000000000000']],
        ['name'],
      ),
    ])
    const datapath = SB.decodeRows('Datapath_Binding', datapaths?.rows)[0]?.external_ids.name ?? ''
    return {
      name,
      datapath,
      type: row.type,
      addresses: addressesOf(row.mac),
      chassis: SB.decodeRows('Chassis', chassis?.rows)[0]?.name ?? null,
    }
  }

  /** The ports on a datapath (by name) holding `ip`, with their MACs. */
  async holdersOf(datapath: string, ip: string): Promise<{ port: string; mac: string }[]> {
    const [datapaths] = await this.#sb.transact(SB.name, [
      SB.select('Datapath_Binding', [['external_ids', 'includes', { name: datapath }]], ['_uuid']),
    ])
    const uuid = SB.decodeRows('Datapath_Binding', datapaths?.rows)[0]?._uuid
    if (!uuid) return []
    const [ports] = await this.#sb.transact(SB.name, [
      SB.select('Port_Binding', [['datapath', '==', uuid]], ['logical_port', 'mac']),
    ])
    return SB.decodeRows('Port_Binding', ports?.rows).flatMap((p) =>
      addressesOf(p.mac)
        .filter((a) => a.ips.includes(ip))
        .map((a) => ({ port: p.logical_port, mac: a.mac })),
    )
  }

  /** The NAT rules of the group's gateway router on `dpu` (the rows Hydrazine owns). */
  async natRules(group: string, dpu: string): Promise<NatRule[]> {
    const [rows] = await this.#nb.transact(NB.name, [
      NB.select(
        'NAT',
        [['external_ids', 'includes', { [OWNER_KEY]: ownerOf(group), [DPU_KEY]: dpu }]],
        ['type', 'external_ip', 'logical_ip'],
      ),
    ])
    return NB.decodeRows('NAT', rows?.rows).map((r) => ({
      type: r.type,
      external_ip: r.external_ip,
      logical_ip: r.logical_ip,
    }))
  }
}

function addressesOf(entries: readonly string[]): { mac: string; ips: string[] }[] {
  return entries.flatMap((e) => {
    const parsed = bindingAddresses(e)
    return parsed ? [parsed] : []
  })
}

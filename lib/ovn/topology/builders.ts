/**
 * Builders of one group's desired NB rows: each pushes a row carrying the group's owner
 * `external_ids` and its key, hung under its parent. Pure; `compile.ts` decides which.
 */
import type { Writable } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'
import { macFor } from './addresses.ts'
import { GROUP_KEY, OWNER_KEY, ownerOf, ROW_KEY, rowKeys } from './names.ts'
import type { DesiredRow } from './rows.ts'

type Extra = Record<string, string>

/** The row builders of group `g`. */
export function rowBuilders(g: string) {
  const owner = ownerOf(g)
  const ids = (key: string, extra: Extra = {}) => ({
    [OWNER_KEY]: owner,
    [GROUP_KEY]: g,
    [ROW_KEY]: key,
    ...extra,
  })
  const ls = (rows: DesiredRow[], key: string, name: string, extra?: Extra) =>
    rows.push({ table: 'Logical_Switch', key, row: { name, external_ids: ids(key, extra) } })
  const lsp = (
    rows: DesiredRow[],
    switchKey: string,
    name: string,
    row: Omit<Partial<Writable<NbTables['Logical_Switch_Port']>>, 'name' | 'external_ids'>,
    extra?: Extra,
  ) => {
    const key = rowKeys.switchPort(name)
    rows.push({
      table: 'Logical_Switch_Port',
      key,
      row: { name, ...row, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Switch', key: switchKey, column: 'ports' },
    })
  }
  const lrp = (
    rows: DesiredRow[],
    routerKey: string,
    name: string,
    networks: string[],
    extra?: Extra,
    columns: Omit<
      Partial<Writable<NbTables['Logical_Router_Port']>>,
      'name' | 'mac' | 'networks' | 'external_ids'
    > = {},
  ) => {
    const key = rowKeys.routerPort(name)
    rows.push({
      table: 'Logical_Router_Port',
      key,
      row: { name, mac: macFor(name), networks, ...columns, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'ports' },
    })
  }
  /** The switch-side port of a router link. */
  const routerLink = (
    rows: DesiredRow[],
    switchKey: string,
    lspName: string,
    lrpName: string,
    extra?: Extra,
  ) =>
    lsp(
      rows,
      switchKey,
      lspName,
      { type: 'router', addresses: ['router'], options: { 'router-port': lrpName } },
      extra,
    )
  const route = (
    rows: DesiredRow[],
    routerKey: string,
    prefix: string,
    nexthop: string,
    dpu: string,
    extra?: Extra,
  ) => {
    // One route per prefix and DPU: a changed next hop is an update, not a new row.
    const key = rowKeys.route(routerKey, prefix, dpu)
    rows.push({
      table: 'Logical_Router_Static_Route',
      key,
      row: { ip_prefix: prefix, nexthop, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'static_routes' },
    })
  }
  const nat = (
    rows: DesiredRow[],
    routerKey: string,
    type: 'snat' | 'dnat' | 'dnat_and_snat',
    externalIp: string,
    logicalIp: string,
    extra: Extra,
  ) => {
    const key = rowKeys.nat(routerKey, type, externalIp, logicalIp)
    rows.push({
      table: 'NAT',
      key,
      row: { type, external_ip: externalIp, logical_ip: logicalIp, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'nat' },
    })
  }
  const policy = (
    rows: DesiredRow[],
    routerKey: string,
    key: string,
    row: Pick<Writable<NbTables['Logical_Router_Policy']>, 'priority' | 'match' | 'action'> &
      Partial<Pick<Writable<NbTables['Logical_Router_Policy']>, 'nexthops'>>,
    extra?: Extra,
  ) =>
    rows.push({
      table: 'Logical_Router_Policy',
      key,
      row: { ...row, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'policies' },
    })

  /** A DNS row the switch `switchKey` answers queries from (its `dns_records`). */
  const dns = (
    rows: DesiredRow[],
    switchKey: string,
    key: string,
    records: Record<string, string>,
    extra?: Extra,
  ) =>
    rows.push({
      table: 'DNS',
      key,
      row: { records, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Switch', key: switchKey, column: 'dns_records' },
    })

  /** A stateless `drop` ACL on the switch `switchKey` (its `acls`). */
  const dropAcl = (
    rows: DesiredRow[],
    switchKey: string,
    key: string,
    row: { direction: 'from-lport' | 'to-lport'; priority: number; match: string },
    extra?: Extra,
  ) =>
    rows.push({
      table: 'ACL',
      key,
      row: { ...row, action: 'drop', external_ids: ids(key, extra) },
      parent: { table: 'Logical_Switch', key: switchKey, column: 'acls' },
    })

  /** An `Address_Set` (a root row: no parent holds it). */
  const addressSet = (
    rows: DesiredRow[],
    key: string,
    name: string,
    addresses: string[],
    extra?: Extra,
  ) =>
    rows.push({
      table: 'Address_Set',
      key,
      row: { name, addresses, external_ids: ids(key, extra) },
    })

  return { owner, ids, ls, lsp, lrp, routerLink, route, nat, policy, dns, dropAcl, addressSet }
}

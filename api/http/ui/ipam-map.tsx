/**
 * A group's address map for people (after Ganeti's `gnt-network info`): per subnet its
 * counts, its pools, and a grid of cells — one per address for a subnet of up to 1,024
 * addresses, one per run of like addresses for a larger one — each free, used (with its
 * holder), reserved, or in no pool, with a legend. Drawn from `groupIpam`'s answer
 * (`lib/ipam/usage.ts`); `ipamCells` is the pure part.
 *
 * @example
 * <IpamMap usage={await ops.groupIpam('group-a')} />
 */
import { formatIp, parseCidr, parseIp } from '../../../lib/ipam/address.ts'
import type { NetworkUsage, SubnetUsage } from '../../../lib/ipam/index.ts'

export type CellState = 'used' | 'reserved' | 'free' | 'outside'

/** One cell of the grid: an address, or a run of addresses in the same state. */
export interface IpamCell {
  readonly state: CellState
  readonly first: string
  readonly last: string
  readonly count: bigint
  /** Who holds it (a used address only). */
  readonly owner?: string
  /** The pool it lies in (an address only), `default` included. */
  readonly pool?: string
}

const STATE: Readonly<Record<string, CellState>> = {
  '+': 'used',
  X: 'reserved',
  '.': 'free',
  '-': 'outside',
}

const WORD: Readonly<Record<CellState, string>> = {
  used: 'used',
  reserved: 'reserved',
  free: 'free',
  outside: 'in no pool',
}

/** Most cells drawn for one subnet; the rest are counted, not drawn. */
export const MAX_CELLS = 2048

/**
 * The cells of a subnet's map, first address first, and how many more there are beyond
 * `MAX_CELLS`. Each cell knows its addresses; an address cell its holder and its pool.
 */
export function ipamCells(
  subnet: Pick<SubnetUsage, 'cidr' | 'map' | 'mapFormat' | 'pools'>,
  allocations: NetworkUsage['allocations'],
): { cells: IpamCell[]; more: number } {
  const cidr = parseCidr(subnet.cidr)
  const at = (offset: bigint) => formatIp({ version: cidr.version, value: cidr.first + offset })
  const owners = new Map(allocations.map((a) => [a.ip, a.owner]))
  const pools = subnet.pools.map((p) => ({
    name: p.name ?? 'default',
    first: parseIp(p.start).value,
    last: parseIp(p.end).value,
  }))
  const poolOf = (offset: bigint) => {
    const value = cidr.first + offset
    return pools.find((p) => p.first <= value && value <= p.last)?.name
  }
  const cells: IpamCell[] = []
  let more = 0
  const add = (state: CellState, offset: bigint, count: bigint) => {
    if (cells.length >= MAX_CELLS) {
      more++
      return
    }
    const first = at(offset)
    if (count === 1n) {
      const owner = state === 'used' ? owners.get(first) : undefined
      const pool = poolOf(offset)
      cells.push({
        state,
        first,
        last: first,
        count,
        ...(owner ? { owner } : {}),
        ...(pool ? { pool } : {}),
      })
    } else {
      cells.push({ state, first, last: at(offset + count - 1n), count })
    }
  }
  if (subnet.mapFormat === 'address') {
    ;[...subnet.map].forEach((ch, i) => {
      add(STATE[ch] ?? 'outside', BigInt(i), 1n)
    })
  } else {
    let offset = 0n
    for (const [, ch = '-', n = '0'] of subnet.map.matchAll(/([+X.-])(\d+)/g)) {
      const count = BigInt(n)
      add(STATE[ch] ?? 'outside', offset, count)
      offset += count
    }
  }
  return { cells, more }
}

function cellTitle(c: IpamCell): string {
  const where = c.count === 1n ? c.first : `${c.first} – ${c.last} (${c.count} addresses)`
  const who = c.owner ? ` by ${c.owner}` : ''
  const pool = c.pool ? `, pool ${c.pool}` : ''
  return `${where}: ${WORD[c.state]}${who}${pool}`
}

function Legend() {
  return (
    <p class="legend">
      {(['free', 'used', 'reserved', 'outside'] as const).map((s) => (
        <span>
          <span class={`cell ${s}`} aria-hidden="true" />
          {WORD[s]}
        </span>
      ))}
    </p>
  )
}

function SubnetMap(props: { subnet: SubnetUsage; allocations: NetworkUsage['allocations'] }) {
  const { subnet } = props
  const { cells, more } = ipamCells(subnet, props.allocations)
  const id = `ipam-${subnet.cidr.replace(/[^0-9a-zA-Z]/g, '-')}`
  return (
    <section aria-labelledby={id} data-subnet={subnet.cidr}>
      <h3 id={id}>
        {subnet.cidr}
        {subnet.gateway ? ` · gateway ${subnet.gateway}` : ' · no gateway (L2 only)'}
        {subnet.dhcp ? ' · DHCP' : ''}
      </h3>
      <table>
        <caption class="sr-only">{`Addresses of ${subnet.cidr}`}</caption>
        <thead>
          <tr>
            <th scope="col">Pool</th>
            <th scope="col">Range</th>
            <th scope="col" class="num">
              Size
            </th>
            <th scope="col" class="num">
              Used
            </th>
            <th scope="col" class="num">
              Free
            </th>
          </tr>
        </thead>
        <tbody>
          <tr>
            <th scope="row">whole subnet</th>
            <td>{`${subnet.size} addresses, ${subnet.reserved} reserved`}</td>
            <td class="num">{subnet.size}</td>
            <td class="num" data-ipam-used={subnet.cidr}>
              {subnet.used}
            </td>
            <td class="num">{subnet.free}</td>
          </tr>
          {subnet.pools.map((p) => (
            <tr>
              <th scope="row">{p.name ?? 'default'}</th>
              <td class="mono">{`${p.start} – ${p.end}`}</td>
              <td class="num">{p.size}</td>
              <td class="num">{p.used}</td>
              <td class="num">{p.free}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {subnet.external.length > 0 ? (
        <p>
          {'Reservations: '}
          {subnet.external
            .map((r) => (r.end && r.end !== r.start ? `${r.start}–${r.end}` : r.start))
            .join(', ')}
        </p>
      ) : null}
      <ul class="ipam-grid" aria-label={`Address map of ${subnet.cidr}`}>
        {cells.map((c) => (
          <li
            class={`cell ${c.state}${c.count > 1n ? ' wide' : ''}`}
            title={cellTitle(c)}
            aria-label={cellTitle(c)}
            data-state={c.state}
          >
            {c.count > 1n ? String(c.count) : ''}
          </li>
        ))}
      </ul>
      {more > 0 ? <p class="notice">{`${more} more runs are not drawn.`}</p> : null}
    </section>
  )
}

/** Every subnet of the group's map, with one legend. */
export function IpamMap(props: { usage: NetworkUsage }) {
  const { usage } = props
  return (
    <div class="ipam">
      <Legend />
      {usage.subnets.map((s) => (
        <SubnetMap subnet={s} allocations={usage.allocations} />
      ))}
      {usage.allocations.length > 0 ? (
        <table>
          <caption class="sr-only">Held addresses</caption>
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">Held by</th>
            </tr>
          </thead>
          <tbody>
            {usage.allocations.map((a) => (
              <tr>
                <td class="mono">{a.ip}</td>
                <td>
                  {a.owner.startsWith('relay/') ? (
                    `DHCP relay on ${a.owner.slice('relay/'.length)}`
                  ) : (
                    <a href={`/ui/hosts/${encodeURIComponent(a.owner)}`}>{a.owner}</a>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  )
}

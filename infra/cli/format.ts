/**
 * How `hz` shows objects to a person: aligned tables for lists, a short summary for one
 * object, a group's address map as tables and lines of addresses. `--json` bypasses all
 * of this.
 */
import { type Cidr, formatIp, parseCidr } from '../../lib/ipam/address.ts'

type Row = Readonly<Record<string, unknown>>

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** The value at a dotted path (`status.phase`), or undefined. */
export function at(value: unknown, path: string): unknown {
  let current = value
  for (const key of path.split('.')) {
    if (!isRecord(current)) return undefined
    current = current[key]
  }
  return current
}

const text = (value: unknown): string =>
  value === undefined || value === null
    ? '-'
    : Array.isArray(value)
      ? value.map(text).join(',') || '-'
      : typeof value === 'object'
        ? JSON.stringify(value)
        : String(value)

/** Columns as [header, dotted path or function of the row]. */
export type Columns = readonly (readonly [string, string | ((row: Row) => unknown)])[]

/** An aligned table, one line per row, headers first. */
export function table(rows: readonly unknown[], columns: Columns): string {
  const cells = rows.map((row) =>
    columns.map(([, get]) =>
      text(typeof get === 'string' ? at(row, get) : get(isRecord(row) ? row : {})),
    ),
  )
  const widths = columns.map(([header], i) =>
    Math.max(header.length, ...cells.map((line) => line[i]?.length ?? 0)),
  )
  const line = (values: readonly string[]) =>
    values
      .map((value, i) => (i === values.length - 1 ? value : value.padEnd(widths[i] ?? 0)))
      .join('  ')
  return [line(columns.map(([header]) => header)), ...cells.map(line)].join('\n')
}

/**
 * Whether a group's own OVN central runs, as its `CentralRunning` condition says (centrals
 * on demand): `running`, `stopped` (no hosts), or empty where centrals always run.
 */
function centralOf(group: unknown): string {
  const conditions = at(group, 'status.conditions')
  const found = Array.isArray(conditions)
    ? (conditions as { type?: unknown; status?: unknown }[]).find(
        (c) => c.type === 'CentralRunning',
      )
    : undefined
  if (!found) return ''
  return found.status === 'True' ? 'running' : 'stopped'
}

/** The columns each list shows. */
export const COLUMNS: Readonly<Record<string, Columns>> = {
  'resource-groups': [
    ['NAME', 'name'],
    ['TENANT', 'spec.tenantId'],
    // An IPv6-only group's network is its network6.
    ['NETWORK', (r) => text(at(r, 'spec.network.cidr') ?? at(r, 'spec.network6.cidr'))],
    ['PHASE', 'status.phase'],
    ['HOSTS', 'status.managedResourceCount'],
    ['CENTRAL', centralOf],
    ['VERSION', (r) => `${text(at(r, 'status.observedVersion'))}/${text(at(r, 'specVersion'))}`],
  ],
  'managed-resources': [
    ['NAME', 'name'],
    ['GROUP', 'spec.resourceGroup'],
    ['DPU', 'spec.dpu.id'],
    ['IP', 'status.hostAccessIPs.hostIP'],
    ['IPV6', 'status.hostAccessIPs.hostIPv6'],
    ['ACCESS', 'spec.hostAccess'],
    ['PUBLIC IP', 'status.hostAccessIPs.publicIP'],
    ['PHASE', 'status.phase'],
  ],
  dpus: [
    ['ID', 'id'],
    ['STATE', 'state'],
    ['TENANT', 'spec.tenantId'],
    ['HOSTS', (r) => (Array.isArray(r.hosts) ? r.hosts.length : undefined)],
    ['PORTS', (r) => portsByNetwork(r.ports)],
    ['LAST HEARTBEAT', 'lastHeartbeat'],
  ],
  'public-ips': [
    ['IP', 'ip'],
    ['ALLOCATED', 'allocated'],
    ['TO', 'allocatedTo'],
    ['HELD FOR', (r) => heldFor(at(r, 'heldUntilIsolatedBy'))],
  ],
  events: [
    ['TIME', 'at'],
    ['TYPE', 'type'],
    ['REASON', 'reason'],
    ['MESSAGE', 'message'],
  ],
}

/** A public IP held for a pending isolation: `isolation of h1 on dpu-1`. */
function heldFor(hold: unknown): string | undefined {
  if (!isRecord(hold)) return undefined
  return `isolation of ${text(hold.host)} on ${text(hold.dpu)}`
}

/**
 * A DPU's host ports counted by the network they are on (`2 admin, 1 tenant, 3 none`);
 * undefined for a DPU that reports none.
 */
function portsByNetwork(ports: unknown): string | undefined {
  if (!Array.isArray(ports) || ports.length === 0) return undefined
  const counts = new Map<string, number>()
  for (const p of ports) {
    const network = text(at(p, 'network'))
    counts.set(network, (counts.get(network) ?? 0) + 1)
  }
  return ['admin', 'tenant', 'none']
    .filter((n) => counts.has(n))
    .map((n) => `${counts.get(n)} ${n}`)
    .join(', ')
}

/** One object: its identity, phase and conditions, then the rest as indented JSON. */
export function summary(object: unknown): string {
  if (!isRecord(object)) return text(object)
  const lines: string[] = []
  for (const key of ['name', 'id', 'ip', 'state', 'allocated', 'allocatedTo']) {
    if (object[key] !== undefined) lines.push(`${key}: ${text(object[key])}`)
  }
  const held = heldFor(object.heldUntilIsolatedBy)
  if (held) lines.push(`heldFor: ${held}`)
  const phase = at(object, 'status.phase')
  if (phase !== undefined) lines.push(`phase: ${text(phase)}`)
  const conditions = at(object, 'status.conditions')
  if (Array.isArray(conditions) && conditions.length > 0) {
    lines.push('conditions:')
    lines.push(
      table(conditions, [
        ['  TYPE', (c) => `  ${text(c.type)}`],
        ['STATUS', 'status'],
        ['REASON', 'reason'],
        ['MESSAGE', 'message'],
      ]),
    )
  }
  const ports = object.ports
  if (Array.isArray(ports) && ports.length > 0) {
    // A DPU's host ports: which network each is on.
    lines.push('ports:')
    lines.push(
      table(ports, [
        ['  PORT', (p) => `  ${text(p.port)}`],
        ['NETWORK', 'network'],
        ['GROUP', 'group'],
        ['HELD BY', 'host'],
        ['PHASE', 'phase'],
        ['WHY', 'reason'],
      ]),
    )
  }
  lines.push(JSON.stringify(object, null, 2))
  return lines.join('\n')
}

/** A dry run's plan in a few lines: each part that would change, with its rows or items. */
export function planText(label: string, plan: unknown): string {
  const lines = [`${label} (dry run):`]
  const ids = (path: string) => {
    const value = at(plan, path)
    return Array.isArray(value) ? value.map(text) : []
  }
  for (const change of ['insert', 'update', 'delete']) {
    const rows = ids(`nb.${change}`)
    if (rows.length > 0) lines.push(`  NB ${change} ${rows.length}: ${rows.join(' ')}`)
  }
  for (const change of ['announce', 'withdraw']) {
    const prefixes = at(plan, `frr.${change}`)
    if (!Array.isArray(prefixes)) continue
    for (const p of prefixes) {
      lines.push(
        `  FRR ${change} ${text(at(p, 'prefix') ?? '(from the pool)')}${at(p, 'nextHop') ? ` via ${text(at(p, 'nextHop'))}` : ''}`,
      )
    }
  }
  const jobs = at(plan, 'agentJobs')
  for (const job of Array.isArray(jobs) ? jobs : []) {
    lines.push(`  agent ${text(at(job, 'dpu'))}: ${text(at(job, 'job'))} ${text(at(job, 'host'))}`)
  }
  for (const change of ['allocate', 'release']) {
    const addresses = at(plan, `addresses.${change}`)
    for (const a of Array.isArray(addresses) ? addresses : []) {
      lines.push(
        `  ${change} ${text(at(a, 'ip') ?? '(none free)')} (${text(at(a, 'pool'))} pool) for ${text(at(a, 'owner'))}`,
      )
    }
  }
  for (const note of ids('notes')) lines.push(`  ${note}`)
  return lines.join('\n')
}

/** A trace's answer for a person: its summary sentence, the hops in order, then notes. */
export function traceText(answer: unknown): string {
  const lines = [text(at(answer, 'summary'))]
  const hops = at(answer, 'hops')
  for (const [i, hop] of (Array.isArray(hops) ? hops : []).entries()) {
    lines.push(`  ${i + 1}. ${text(hop)}`)
  }
  const notes = at(answer, 'notes')
  for (const note of Array.isArray(notes) ? notes : []) lines.push(`  note: ${text(note)}`)
  const runs = at(answer, 'traces')
  for (const run of Array.isArray(runs) ? runs : []) {
    const raw = at(run, 'raw')
    if (typeof raw === 'string') lines.push(`--- ovn-trace ${text(at(run, 'datapath'))}`, raw)
  }
  return lines.join('\n')
}

/** Addresses per line of a map drawn one character per address (Ganeti's width). */
const MAP_WIDTH = 64

const rowsOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : [])

/**
 * A group's address map (`GET /v1/resource-groups/{name}/ipam`) for a person: its
 * subnets' counts, their pools and reservations, each subnet's map, and who holds what.
 *
 * @example
 * SUBNET         NAME  GATEWAY     DHCP   SIZE  USED  RESERVED  FREE
 * 10.10.10.0/24  -     10.10.10.1  false  256   3     11        242
 * …
 * map of 10.10.10.0/24 (+ used, X reserved, . free, - in no pool):
 *   10.10.10.0    XXXXXXXXXX+X+...................................................
 *   10.10.10.64   ................................................................
 */
export function ipamText(answer: unknown): string {
  const subnets = rowsOf(at(answer, 'subnets'))
  const perSubnet = (key: string) =>
    subnets.flatMap((s) => rowsOf(at(s, key)).map((row) => ({ subnet: at(s, 'cidr'), row })))
  const lines = [
    `network ${text(at(answer, 'network'))}`,
    '',
    table(subnets, [
      ['SUBNET', 'cidr'],
      ['NAME', 'name'],
      ['GATEWAY', 'gateway'],
      ['DHCP', 'dhcp'],
      ['SIZE', 'size'],
      ['USED', 'used'],
      ['RESERVED', 'reserved'],
      ['FREE', 'free'],
    ]),
    '',
    table(perSubnet('pools'), [
      ['SUBNET', 'subnet'],
      ['POOL', 'row.name'],
      ['START', 'row.start'],
      ['END', 'row.end'],
      ['SIZE', 'row.size'],
      ['USED', 'row.used'],
      ['FREE', 'row.free'],
    ]),
  ]
  const reservations = perSubnet('external')
  if (reservations.length > 0) {
    lines.push(
      '',
      table(reservations, [
        ['SUBNET', 'subnet'],
        ['RESERVED FROM', 'row.start'],
        ['TO', 'row.end'],
      ]),
    )
  }
  for (const subnet of subnets) {
    const cidr = text(at(subnet, 'cidr'))
    const map = text(at(subnet, 'map'))
    if (at(subnet, 'mapFormat') === 'address') {
      lines.push('', `map of ${cidr} (+ used, X reserved, . free, - in no pool):`)
      lines.push(...addressLines(cidr, map))
    } else {
      lines.push(
        '',
        `map of ${cidr}, as runs of <state><count> (+ used, X reserved, . free, - in no pool):`,
      )
      lines.push(`  ${map}`)
    }
  }
  const allocations = rowsOf(at(answer, 'allocations'))
  lines.push(
    '',
    allocations.length === 0
      ? 'no address is held'
      : table(allocations, [
          ['IP', 'ip'],
          ['OWNER', 'owner'],
        ]),
  )
  return lines.join('\n')
}

/** A per-address map in lines of `MAP_WIDTH`, each led by its first address. */
function addressLines(cidr: string, map: string): string[] {
  let first: Cidr | undefined
  try {
    first = parseCidr(cidr)
  } catch {
    first = undefined
  }
  const chunks: { label: string; chunk: string }[] = []
  for (let offset = 0; offset < map.length; offset += MAP_WIDTH) {
    const label = first
      ? formatIp({ version: first.version, value: first.first + BigInt(offset) })
      : `+${offset}`
    chunks.push({ label, chunk: map.slice(offset, offset + MAP_WIDTH) })
  }
  const width = Math.max(0, ...chunks.map((c) => c.label.length))
  return chunks.map(({ label, chunk }) => `  ${label.padEnd(width)}  ${chunk}`)
}

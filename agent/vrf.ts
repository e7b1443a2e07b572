/**
 * A Fabric group's VRF on the DPU, with two backends behind one interface:
 *
 * - `kernel` (a real DPU): a VRF device `hzv<VNI>` holding a bridge `hzb<VNI>` with the
 *   L3VNI VXLAN device `hzx<VNI>`; a host port joins the VRF as its slave.
 * - `netns` (the lab, whose kernel has no VRF device): the VRF is a network namespace
 *   (`<underlay netns>-v<VNI>`), bound as `hzv<VNI>` into a directory of its own that the
 *   DPU's zebra (`-n`) sees as `/run/netns`, so zebra takes it, and only it, as VRF
 *   `hzv<VNI>`. The VXLAN device is made in the underlay namespace and moved in (its UDP
 *   socket stays in the underlay); a host port is moved into the namespace.
 *
 * Either way FRR sees a VRF named `hzv<VNI>` with the bridge as its L3VNI SVI, and the
 * same configuration serves both (`evpn.ts`). In the VRF, the group's interface
 * `vlan<N>` (N its VLAN id) is a bridge holding the group's host ports on this DPU, as a
 * VLAN's SVI does: it carries the group's gateway as a /32 (/128) and answers ARP for the
 * group's other addresses (proxy ARP), and each host's own /32 (/128) is a kernel route
 * on it: the route FRR redistributes as the EVPN type-5 route. The group's DHCP relay
 * hangs off it too (`fabric-relay.ts`), so that requests reach the relay on `vlan<N>`,
 * the circuit id Carbide reads.
 *
 * Access levels (protocol 3.1): a leaking host's route carries a metric the DPU's FRR turns
 * into the border's marking (`LEAK_METRIC`, `evpn.ts`): its own address FabricAccess, its
 * public IP PublicAccess. Everything else the group interface receives stays inside the
 * group: `ip rule`s on `vlan<N>` let a leaking host's source use the whole VRF table, and
 * any other source only its routes longer than /0 (the border's default route is not
 * theirs); what is left is refused (`prohibit`).
 *
 * Each step is planned as a list of commands (pure, `plan…`), then run; a command that
 * finds its work done (a device that exists, a route already gone) is not an error, so a
 * step may run twice.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { isIPv4 } from 'node:net'
import { promisify } from 'node:util'
import type { FabricAccess } from '../lib/agent-protocol/index.ts'
import { canonicalIp } from '../lib/ipam/address.ts'

const exec = promisify(execFile)

/** One command: its argv, and what it may answer when its work is already done. */
export interface Command {
  readonly argv: readonly string[]
  readonly done?: RegExp
}

export interface VrfSpec {
  readonly vni: number
  /** The group's VLAN id: its interface in the VRF is `vlan<N>`. */
  readonly vlan: number
  /** The group the VRF belongs to (kept as the bridge's alias, for reports). */
  readonly group: string
  /** The DPU's VTEP address: the VXLAN device's source. */
  readonly vtep: string
}

/** A host port leaving its VRF, with the host's routes. */
export interface PortOutOfVrf {
  readonly vni: number
  readonly port: string
  readonly addresses: readonly string[]
  /** The group's VLAN id (its leak rules are on `vlan<N>`); unknown: none removed. */
  readonly vlan?: number | undefined
}

/** The host routes of a VRF to withdraw, with the leak rules of their sources. */
export interface RoutesOut {
  readonly vni: number
  readonly addresses: readonly string[]
  readonly vlan?: number | undefined
}

export interface PortInVrf {
  readonly vni: number
  readonly vlan: number
  readonly port: string
  readonly gateways: readonly { address: string; prefixLength: number }[]
  readonly addresses: readonly string[]
  readonly mtu?: number | undefined
  /** What the host may reach and be reached from (absent: None). */
  readonly access?: FabricAccess | undefined
  /** Its public IP (PublicAccess): routed on the group interface, marked public. */
  readonly publicIp?: string | undefined
}

/** What a VRF holds, as the backend reads it back. */
export interface VrfState {
  readonly vrf: string
  readonly vni: number
  /** The VLAN id of its group interface `vlan<N>` (undefined: it has none). */
  readonly vlan: number | undefined
  readonly group: string
  /** The host ports in it (on its group interface, or in its namespace). */
  readonly ports: readonly string[]
  /** Host routes on its group interface (`10.0.0.5/32`). */
  readonly hostRoutes: readonly string[]
}

/** Names FRR and the kernel know the group's VRF by. */
export const vrfNames = (vni: number) => ({
  vrf: `hzv${vni}`,
  bridge: `hzb${vni}`,
  vxlan: `hzx${vni}`,
  /** The VRF's end of the DHCP relay's link, a member of the group interface. */
  relayLink: `hzd${vni}`,
})

/** The group's interface in its VRF: `vlan<N>`, also the DHCP relay's circuit id. */
export const groupInterfaceOf = (vlan: number) => `vlan${vlan}`

/**
 * The group interface's MAC, the gateway's (the anycast gateway MAC): from the VNI, the
 * same on every DPU and every time the VRF is made, so that a host's ARP entry for its
 * gateway stays right when its VRF is made again or it moves to another DPU. Pure.
 *
 * @example gatewayMacOf(10000) // '02:68:7b:00:27:10'
 */
export function gatewayMacOf(vni: number): string {
  const bytes = [(vni >> 16) & 255, (vni >> 8) & 255, vni & 255]
  return ['02', '68', '7b', ...bytes.map((b) => b.toString(16).padStart(2, '0'))].join(':')
}

/**
 * The L3VNI bridge's MAC, which FRR announces as the DPU's router MAC (RMAC) in its type-5
 * routes: from the VTEP, the same for each of the DPU's VRFs and every time one is made.
 * A bridge made anew otherwise takes a random MAC, and FRR before 10.x may keep the old RMAC
 * of a VTEP whose RMAC changed (FRRouting/frr#16837, fixed by #20588): the other DPUs then
 * send that VRF's traffic to a MAC it no longer has. One RMAC per VTEP for all its L3VNIs is
 * also what zebra's table of remote VTEPs holds. An IPv4 VTEP is its four bytes (no two
 * VTEPs share one); an IPv6 one, four bytes of its SHA-256. Locally administered, unicast.
 * Pure.
 *
 * @example routerMacOf('100.64.0.2') // '06:72:64:40:00:02'
 */
export function routerMacOf(vtep: string): string {
  const [kind, bytes] = isIPv4(vtep)
    ? ['72', vtep.split('.').map(Number)]
    : ['76', [...createHash('sha256').update(canonicalIp(vtep)).digest().subarray(0, 4)]]
  return ['06', kind, ...bytes.map((b) => b.toString(16).padStart(2, '0'))].join(':')
}

// A newer kernel says an address a device holds is "already assigned".
const exists = /File exists|already exists|already assigned/
const gone = /Cannot find device|No such process|does not exist|No such file|not found/i
const hostPrefix = (a: string) => `${a}/${isIPv4(a) ? 32 : 128}`
const gatewayPrefix = (a: string) => `${a}/${isIPv4(a) ? 32 : 128}`

/**
 * The metric of each host route on a group interface, which the DPU's FRR turns into the
 * border's marking (`evpn.ts`): `fabric` a leaking host's own address (FabricAccess,
 * PublicAccess), `public` its public IP, `none` any other host route (unmarked). Never 0:
 * the kernel takes metric 0 in a delete as "any metric".
 */
export const LEAK_METRIC = { none: 4200, fabric: 4201, public: 4202 } as const

/** `ip rule` preferences on the group interface: leaking sources, then everyone else. */
export const RULE_PREF = { leak: 500, group: 510, refuse: 511 } as const

/** What each route of a host looks like on its group interface: prefix and metric. */
export function hostRoutesWanted(port: {
  addresses: readonly string[]
  access?: FabricAccess | undefined
  publicIp?: string | undefined
}): { prefix: string; metric: number; address: string }[] {
  const leaks = port.access === 'FabricAccess' || port.access === 'PublicAccess'
  return [
    ...port.addresses.map((a) => ({
      address: a,
      prefix: hostPrefix(a),
      metric: leaks ? LEAK_METRIC.fabric : LEAK_METRIC.none,
    })),
    ...(port.publicIp && port.access === 'PublicAccess'
      ? [{ address: port.publicIp, prefix: hostPrefix(port.publicIp), metric: LEAK_METRIC.public }]
      : []),
  ]
}

/**
 * The commands that make `route`'s prefix have exactly one route on `svi`, with its
 * metric: kept when it is there already (no flap), else every route of the prefix goes
 * (one of another access level, or one an older agent made with metric 0) and the route
 * is added. `ip` is the `ip …` prefix of the VRF, `table` the arguments naming its table.
 */
function routeCommands(
  ip: (...argv: string[]) => string[],
  svi: string,
  route: { prefix: string; metric: number; address: string },
  table: readonly string[],
): Command[] {
  const on = [route.prefix, 'dev', svi, ...table]
  const show = ip('-j', 'route', 'show', ...on).join(' ')
  const add = ip('route', 'add', ...on, 'metric', String(route.metric)).join(' ')
  return [
    {
      argv: [
        'sh',
        '-c',
        `${show} | grep -q '"metric":${route.metric}[,}]' || { ${routeRemovalLoop(ip, on)}; ${add}; }`,
      ],
    },
    ...Object.values(LEAK_METRIC)
      .filter((m) => m !== route.metric)
      .map((m) => ({
        argv: ip('route', 'del', ...on, 'metric', String(m)),
        done: gone,
      })),
  ]
}

/** Shell: deletes every route matching `on`, whatever its metric. */
function routeRemovalLoop(ip: (...argv: string[]) => string[], on: readonly string[]): string {
  return `while ${ip('route', 'del', ...on).join(' ')} 2>/dev/null; do :; done`
}

/** Every route `address` has in the VRF, whatever its metric, deleted. */
function routeRemoval(
  ip: (...argv: string[]) => string[],
  address: string,
  table: readonly string[],
): Command[] {
  return [{ argv: ['sh', '-c', routeRemovalLoop(ip, [hostPrefix(address), ...table])] }]
}

const family = (a: string) => (isIPv4(a) ? '-4' : '-6')

/**
 * The group interface's own rules, per family: a source the VRF's routes longer than /0
 * only, then refused. `lookup` names the VRF's table.
 */
function groupRules(ip: (...argv: string[]) => string[], svi: string, lookup: string): Command[] {
  return ['-4', '-6'].flatMap((f) => [
    {
      argv: ip(
        f,
        'rule',
        'add',
        'pref',
        String(RULE_PREF.group),
        'iif',
        svi,
        'lookup',
        lookup,
        'suppress_prefixlength',
        '0',
      ),
      done: exists,
    },
    {
      argv: ip(f, 'rule', 'add', 'pref', String(RULE_PREF.refuse), 'iif', svi, 'prohibit'),
      done: exists,
    },
  ])
}

/** A leaking source's rule: the whole VRF table (the border's default route too). */
function leakRule(
  ip: (...argv: string[]) => string[],
  svi: string,
  address: string,
  lookup: string,
  add: boolean,
): Command {
  return {
    argv: ip(
      family(address),
      'rule',
      add ? 'add' : 'del',
      'pref',
      String(RULE_PREF.leak),
      'iif',
      svi,
      'from',
      hostPrefix(address),
      'lookup',
      lookup,
    ),
    done: add ? exists : gone,
  }
}

/** A host's routes and leak rules as its access level wants them. */
function hostCommands(
  ip: (...argv: string[]) => string[],
  svi: string,
  port: PortInVrf,
  table: readonly string[],
  lookup: string,
): Command[] {
  const routes = hostRoutesWanted(port)
  const leaks = port.access === 'FabricAccess' || port.access === 'PublicAccess'
  return [
    ...routes.flatMap((r) => routeCommands(ip, svi, r, table)),
    ...routes.map((r) => leakRule(ip, svi, r.address, lookup, leaks)),
  ]
}

/** A host's routes and leak rules gone. */
function hostRemoval(
  ip: (...argv: string[]) => string[],
  route: RoutesOut,
  table: readonly string[],
  lookup: string,
): Command[] {
  const svi = route.vlan === undefined ? undefined : groupInterfaceOf(route.vlan)
  return route.addresses.flatMap((a) => [
    ...routeRemoval(ip, a, table),
    ...(svi ? [leakRule(ip, svi, a, lookup, false)] : []),
  ])
}

export interface VrfBackend {
  readonly kind: 'kernel' | 'netns'
  /** Once, before the first VRF: what the backend needs on the DPU. */
  prepare(): Promise<void>
  ensureVrf(spec: VrfSpec): Promise<void>
  attach(port: PortInVrf): Promise<void>
  /** Withdraws the host's routes and takes the port out of the VRF. */
  detach(port: PortOutOfVrf): Promise<void>
  /** Withdraws routes only (a port not in the VRF, or none). */
  withdraw(route: RoutesOut): Promise<void>
  /** Puts the DHCP relay's link (`relayLink`, made in the VRF) on the group interface. */
  joinRelayLink(vrf: { vni: number; vlan: number }): Promise<void>
  removeVrf(vrf: { vni: number; vlan?: number | undefined }): Promise<void>
  list(): Promise<VrfState[]>
  /** `ip …` argv prefix that runs inside the VRF. */
  inVrf(vni: number): readonly string[]
  /** The network namespace holding the VRF's devices (undefined: the agent's own). */
  namespaceOf(vni: number): string | undefined
}

/**
 * Runs planned commands in order; one whose work is done already is skipped. Neighbouring
 * `ip` commands with the same options go to one `ip … -force -batch -` (starting a program
 * costs the agent several ms of CPU): ip runs every line, says which failed and why, and
 * each failure is held against its own command's "done" test.
 */
export async function runPlan(commands: readonly Command[]): Promise<void> {
  for (const run of batchesOf(commands)) {
    if (run.lines.length === 0) await runOne(run.commands[0] as Command)
    else await runBatch(run.options, run.lines, run.commands)
  }
}

async function runOne(c: Command): Promise<void> {
  const [file = '', ...args] = c.argv
  try {
    await exec(file, args, { timeout: 20_000 })
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? err)
    if (c.done?.test(stderr)) return
    throw new Error(`${c.argv.join(' ')} failed: ${stderr.trim()}`)
  }
}

async function runBatch(
  options: readonly string[],
  lines: readonly string[],
  commands: readonly Command[],
): Promise<void> {
  const stderr = await ipBatch(['ip', ...options, '-force'], lines).then(
    () => undefined,
    (err: unknown) => String((err as { stderr?: string }).stderr ?? err),
  )
  if (stderr === undefined) return
  const failures = batchFailures(stderr)
  if (failures.length === 0) {
    throw new Error(`ip ${options.join(' ')} -batch failed: ${stderr.trim()}`)
  }
  for (const { line, said } of failures) {
    const c = commands[line - 1]
    if (!c) throw new Error(`ip ${options.join(' ')} -batch failed: ${stderr.trim()}`)
    if (!c.done?.test(said)) throw new Error(`${c.argv.join(' ')} failed: ${said}`)
  }
}

/**
 * The lines `ip -force -batch` says failed (1-based), each with what ip said before its
 * "Command failed -:N". Pure.
 *
 * @example batchFailures('RTNETLINK answers: File exists\nCommand failed -:2\n')
 * // [{ line: 2, said: 'RTNETLINK answers: File exists' }]
 */
export function batchFailures(stderr: string): { line: number; said: string }[] {
  const failures: { line: number; said: string }[] = []
  let said: string[] = []
  for (const text of stderr.split('\n')) {
    const m = /^Command failed -:(\d+)$/.exec(text.trim())
    if (m) {
      failures.push({ line: Number(m[1]), said: said.join('\n').trim() })
      said = []
    } else if (text.trim() !== '') said.push(text)
  }
  return failures
}

/** An `ip` argument a batch line carries as it is (no quoting, spaces or comments). */
const plainArgument = /^[A-Za-z0-9_.:/@+=-]+$/

/**
 * A plan cut into what runs as one program: neighbouring `ip` commands with the same
 * options (`-n NS`, `-4`, `-6`) as one batch (`lines`), anything else alone (no lines).
 * `ip netns …` (it runs programs and mounts) and a command with an argument a batch line
 * would read otherwise stay alone. Pure.
 */
export function batchesOf(
  commands: readonly Command[],
): { options: string[]; lines: string[]; commands: Command[] }[] {
  const runs: { options: string[]; lines: string[]; commands: Command[] }[] = []
  for (const c of commands) {
    const split = ipOptionsOf(c.argv)
    const last = runs.at(-1)
    if (!split) runs.push({ options: [], lines: [], commands: [c] })
    else if (last && last.lines.length > 0 && last.options.join(' ') === split.options.join(' ')) {
      last.lines.push(split.line)
      last.commands.push(c)
    } else runs.push({ options: split.options, lines: [split.line], commands: [c] })
  }
  // A batch of one runs as itself: its error reads as it always has.
  return runs.map((r) =>
    r.lines.length === 1 ? { options: [], lines: [], commands: r.commands } : r,
  )
}

function ipOptionsOf(argv: readonly string[]): { options: string[]; line: string } | undefined {
  if (argv[0] !== 'ip') return undefined
  const options: string[] = []
  let i = 1
  for (; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '-4' || a === '-6') options.push(a)
    else if (a === '-n' && argv[i + 1] !== undefined) options.push(a, argv[++i] as string)
    else if (a.startsWith('-')) return undefined
    else break
  }
  const rest = argv.slice(i)
  if (rest.length === 0 || rest[0] === 'netns' || !rest.every((a) => plainArgument.test(a))) {
    return undefined
  }
  return { options, line: rest.join(' ') }
}

async function output(argv: readonly string[]): Promise<string> {
  const [file = '', ...args] = argv
  return exec(file, args, { timeout: 20_000 })
    .then((r) => r.stdout)
    .catch(() => '')
}

/**
 * What `ip … -batch -` prints for `lines`, one output line per command (`ip -j` prints each
 * command's JSON on a line of its own): one process for several reads. None when any
 * command fails.
 */
async function batchOutput(argv: readonly string[], lines: readonly string[]): Promise<string[]> {
  const stdout = await ipBatch(argv, lines)
    .then((r) => r.stdout)
    .catch(() => '')
  const out = stdout.split('\n').filter((l) => l.trim() !== '')
  return out.length === lines.length ? out : []
}

/** `argv` (an `ip …`) with `-batch -`, fed `lines` on its standard input. */
function ipBatch(argv: readonly string[], lines: readonly string[]) {
  const [file = '', ...args] = argv
  const run = exec(file, [...args, '-batch', '-'], { timeout: 20_000 })
  run.child.stdin?.on('error', () => {})
  run.child.stdin?.end(`${lines.join('\n')}\n`)
  return run
}

// ------------------------------------------------------------------ kernel backend

/** The kernel VRF backend's table of VNI `vni`: above the kernel's own tables. */
export const vrfTable = (vni: number) => 1_000_000 + vni

const ip = (...argv: string[]) => ['ip', ...argv]

/** The kernel backend's commands: pure, so that a test can read what a real DPU would run. */
export const kernelPlan = {
  ensureVrf({ vni, vlan, group, vtep }: VrfSpec): Command[] {
    const { vrf, bridge, vxlan } = vrfNames(vni)
    const svi = groupInterfaceOf(vlan)
    return [
      {
        argv: ['ip', 'link', 'add', vrf, 'type', 'vrf', 'table', String(vrfTable(vni))],
        done: exists,
      },
      { argv: ['ip', 'link', 'set', vrf, 'up'] },
      { argv: ['ip', 'link', 'add', bridge, 'type', 'bridge', 'stp_state', '0'], done: exists },
      { argv: ['ip', 'link', 'set', bridge, 'address', routerMacOf(vtep)] },
      { argv: ['ip', 'link', 'set', bridge, 'alias', group] },
      { argv: ['ip', 'link', 'set', bridge, 'master', vrf] },
      { argv: ['ip', 'link', 'set', bridge, 'up'] },
      {
        argv: [
          'ip',
          'link',
          'add',
          vxlan,
          'type',
          'vxlan',
          'id',
          String(vni),
          'local',
          vtep,
          'dstport',
          '4789',
          'nolearning',
        ],
        done: exists,
      },
      { argv: ['ip', 'link', 'set', vxlan, 'master', bridge] },
      { argv: ['ip', 'link', 'set', vxlan, 'up'] },
      { argv: ['ip', 'link', 'add', svi, 'type', 'bridge', 'stp_state', '0'], done: exists },
      { argv: ['ip', 'link', 'set', svi, 'address', gatewayMacOf(vni)] },
      { argv: ['ip', 'link', 'set', svi, 'master', vrf] },
      { argv: ['ip', 'link', 'set', svi, 'up'] },
      { argv: ['sysctl', '-qw', `net.ipv4.conf.${svi}.proxy_arp=1`] },
      ...groupRules(ip, svi, String(vrfTable(vni))),
    ]
  },
  attach(port: PortInVrf): Command[] {
    const { vni, vlan, gateways, mtu } = port
    const { vrf, vxlan } = vrfNames(vni)
    const svi = groupInterfaceOf(vlan)
    return [
      // zebra may leave a VXLAN device it found mid-set-up protodown: the L3VNI is then down.
      { argv: ['ip', 'link', 'set', vxlan, 'protodown', 'off'] },
      { argv: ['ip', 'link', 'set', port.port, 'master', svi] },
      ...(mtu ? [{ argv: ['ip', 'link', 'set', port.port, 'mtu', String(mtu)] }] : []),
      { argv: ['ip', 'link', 'set', port.port, 'up'] },
      ...gateways.map((g) => ({
        argv: ['ip', 'addr', 'add', gatewayPrefix(g.address), 'dev', svi],
        done: exists,
      })),
      ...hostCommands(ip, svi, port, ['vrf', vrf], String(vrfTable(vni))),
    ]
  },
  withdraw(route: RoutesOut): Command[] {
    const { vrf } = vrfNames(route.vni)
    return hostRemoval(ip, route, ['vrf', vrf], String(vrfTable(route.vni)))
  },
  detach({ vni, port, addresses, vlan }: PortOutOfVrf): Command[] {
    return [
      ...kernelPlan.withdraw({ vni, addresses, vlan }),
      // Only a port of this group's interface is asked to leave (`fabric.ts` checks).
      { argv: ['ip', 'link', 'set', port, 'nomaster'], done: gone },
    ]
  },
  joinRelayLink({ vni, vlan }: { vni: number; vlan: number }): Command[] {
    const { relayLink } = vrfNames(vni)
    return [
      { argv: ['ip', 'link', 'set', relayLink, 'master', groupInterfaceOf(vlan)] },
      { argv: ['ip', 'link', 'set', relayLink, 'up'] },
    ]
  },
  removeVrf({ vni, vlan }: { vni: number; vlan?: number | undefined }): Command[] {
    const { vrf, bridge, vxlan } = vrfNames(vni)
    const svi = vlan === undefined ? [] : [groupInterfaceOf(vlan)]
    // The group interface's rules outlive its device: they go with it.
    const rules = svi.flatMap((dev) =>
      ['-4', '-6'].flatMap((f) =>
        [RULE_PREF.group, RULE_PREF.refuse].map((pref) => ({
          argv: ip(f, 'rule', 'del', 'pref', String(pref), 'iif', dev),
          done: gone,
        })),
      ),
    )
    return [
      ...[vxlan, bridge, ...svi, vrf].map((dev) => ({
        argv: ['ip', 'link', 'del', dev],
        done: gone,
      })),
      ...rules,
    ]
  },
}

/** A kernel VRF device per group (a real DPU). */
export function kernelVrfBackend(): VrfBackend {
  return {
    kind: 'kernel',
    prepare: async () => {},
    ensureVrf: (spec) => runPlan(kernelPlan.ensureVrf(spec)),
    attach: (port) => runPlan(kernelPlan.attach(port)),
    detach: (port) => runPlan(kernelPlan.detach(port)),
    withdraw: (route) => runPlan(kernelPlan.withdraw(route)),
    joinRelayLink: (vrf) => runPlan(kernelPlan.joinRelayLink(vrf)),
    removeVrf: (vrf) => runPlan(kernelPlan.removeVrf(vrf)),
    async list() {
      const links = parseLinks(await output(['ip', '-j', '-d', 'link', 'show', 'type', 'vrf']))
      const states: VrfState[] = []
      for (const l of links) {
        const vni = vniOf(l.ifname)
        if (vni === undefined) continue
        const { bridge } = vrfNames(vni)
        const slaves = parseLinks(await output(['ip', '-j', 'link', 'show', 'master', l.ifname]))
        const vlan = vlanOf(slaves)
        const members =
          vlan === undefined
            ? []
            : parseLinks(
                await output(['ip', '-j', 'link', 'show', 'master', groupInterfaceOf(vlan)]),
              )
        states.push({
          vrf: l.ifname,
          vni,
          vlan,
          group: slaves.find((s) => s.ifname === bridge)?.ifalias ?? '',
          ports: hostPortsOf(vni, [...slaves, ...members]),
          hostRoutes: hostRoutesOf(
            await output(['ip', '-j', 'route', 'show', 'vrf', l.ifname]),
            await output(['ip', '-6', '-j', 'route', 'show', 'vrf', l.ifname]),
          ),
        })
      }
      return states
    },
    inVrf: (vni) => ['ip', 'vrf', 'exec', vrfNames(vni).vrf],
    namespaceOf: () => undefined,
  }
}

// ------------------------------------------------------------------ netns backend

/** The netns backend's commands (the lab): pure, like the kernel backend's. */
export function netnsPlan(opts: { underlay?: string | undefined; dir: string }) {
  const u = opts.underlay
  const inUnderlay = (...argv: string[]) => (u ? ['ip', '-n', u, ...argv] : ['ip', ...argv])
  const nsOf = (vni: number) => `${u ?? 'hz'}-v${vni}`
  const view = (vni: number) => `${opts.dir}/${vrfNames(vni).vrf}`
  const inNs =
    (vni: number) =>
    (...argv: string[]) => ['ip', '-n', nsOf(vni), ...argv]
  const withdraw = (route: RoutesOut) => hostRemoval(inNs(route.vni), route, [], 'main')
  return {
    nsOf,
    prepare(): Command[] {
      const d = opts.dir
      return [
        { argv: ['mkdir', '-p', d] },
        // Its own mount, shared: a namespace bound into it later reaches zebra's view too.
        { argv: ['sh', '-c', `mountpoint -q ${d} || mount --bind ${d} ${d}`] },
        { argv: ['mount', '--make-shared', d] },
      ]
    },
    ensureVrf({ vni, vlan, group, vtep }: VrfSpec): Command[] {
      const ns = nsOf(vni)
      const { bridge, vxlan } = vrfNames(vni)
      const svi = groupInterfaceOf(vlan)
      const n = inNs(vni)
      return [
        { argv: ['ip', 'netns', 'add', ns], done: exists },
        {
          argv: [
            'sh',
            '-c',
            `mountpoint -q ${view(vni)} || { touch ${view(vni)} && mount --bind /run/netns/${ns} ${view(vni)}; }`,
          ],
        },
        { argv: n('link', 'set', 'lo', 'up') },
        {
          argv: [
            'ip',
            'netns',
            'exec',
            ns,
            'sysctl',
            '-qw',
            'net.ipv4.ip_forward=1',
            'net.ipv4.conf.all.rp_filter=0',
            'net.ipv4.conf.default.rp_filter=0',
            'net.ipv6.conf.all.forwarding=1',
          ],
        },
        { argv: n('link', 'add', bridge, 'type', 'bridge', 'stp_state', '0'), done: exists },
        { argv: n('link', 'set', bridge, 'address', routerMacOf(vtep)) },
        { argv: n('link', 'set', bridge, 'alias', group) },
        { argv: n('link', 'set', bridge, 'up') },
        {
          argv: ['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv4.conf.${bridge}.rp_filter=0`],
        },
        // Made in the underlay (its UDP socket stays there), then moved into the VRF.
        {
          argv: [
            'sh',
            '-c',
            `ip -n ${ns} link show ${vxlan} >/dev/null 2>&1 || { ${inUnderlay('link', 'add', vxlan, 'type', 'vxlan', 'id', String(vni), 'local', vtep, 'dstport', '4789', 'nolearning').join(' ')} && ${inUnderlay('link', 'set', vxlan, 'netns', ns).join(' ')}; }`,
          ],
        },
        { argv: n('link', 'set', vxlan, 'master', bridge) },
        { argv: n('link', 'set', vxlan, 'up') },
        { argv: n('link', 'add', svi, 'type', 'bridge', 'stp_state', '0'), done: exists },
        { argv: n('link', 'set', svi, 'address', gatewayMacOf(vni)) },
        { argv: n('link', 'set', svi, 'up') },
        { argv: ['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv4.conf.${svi}.proxy_arp=1`] },
        ...groupRules(n, svi, 'main'),
      ]
    },
    attach(host: PortInVrf): Command[] {
      const { vni, vlan, port, gateways, mtu } = host
      const ns = nsOf(vni)
      const n = inNs(vni)
      const svi = groupInterfaceOf(vlan)
      return [
        {
          argv: [
            'sh',
            '-c',
            `ip -n ${ns} link show ${port} >/dev/null 2>&1 || ${inUnderlay('link', 'set', port, 'netns', ns).join(' ')}`,
          ],
        },
        // zebra may leave a VXLAN device it found mid-set-up protodown: the L3VNI is then down.
        { argv: n('link', 'set', vrfNames(vni).vxlan, 'protodown', 'off') },
        { argv: n('link', 'set', port, 'master', svi) },
        ...(mtu ? [{ argv: n('link', 'set', port, 'mtu', String(mtu)) }] : []),
        { argv: n('link', 'set', port, 'up') },
        ...gateways.map((g) => ({
          argv: n(
            'addr',
            'add',
            gatewayPrefix(g.address),
            'dev',
            svi,
            ...(isIPv4(g.address) ? [] : ['nodad']),
          ),
          done: exists,
        })),
        ...hostCommands(n, svi, host, [], 'main'),
      ]
    },
    withdraw,
    detach({ vni, port, addresses, vlan }: PortOutOfVrf): Command[] {
      const ns = nsOf(vni)
      return [
        ...withdraw({ vni, addresses, vlan }),
        // Back to the underlay, where a host port waits for its next job.
        {
          argv: [
            'sh',
            '-c',
            `! ip -n ${ns} link show ${port} >/dev/null 2>&1 || { ip -n ${ns} link set ${port} nomaster && ip -n ${ns} link set ${port} netns ${u ?? '1'} && ${inUnderlay('link', 'set', port, 'up').join(' ')}; }`,
          ],
        },
      ]
    },
    joinRelayLink({ vni, vlan }: { vni: number; vlan: number }): Command[] {
      const n = inNs(vni)
      const { relayLink } = vrfNames(vni)
      return [
        { argv: n('link', 'set', relayLink, 'master', groupInterfaceOf(vlan)) },
        { argv: n('link', 'set', relayLink, 'up') },
      ]
    },
    removeVrf({ vni }: { vni: number }): Command[] {
      return [
        // Lazily: zebra still holds the namespace it is letting go of.
        { argv: ['sh', '-c', `! mountpoint -q ${view(vni)} || umount -l ${view(vni)}`] },
        { argv: ['rm', '-f', view(vni)], done: /busy/ },
        { argv: ['ip', 'netns', 'del', nsOf(vni)], done: gone },
      ]
    },
  }
}

/** A network namespace per group, bound into `dir` for zebra (the lab). */
export function netnsVrfBackend(opts: { underlay?: string | undefined; dir: string }): VrfBackend {
  const plan = netnsPlan(opts)
  return {
    kind: 'netns',
    prepare: () => runPlan(plan.prepare()),
    ensureVrf: (spec) => runPlan(plan.ensureVrf(spec)),
    attach: (port) => runPlan(plan.attach(port)),
    detach: (port) => runPlan(plan.detach(port)),
    withdraw: (route) => runPlan(plan.withdraw(route)),
    joinRelayLink: (vrf) => runPlan(plan.joinRelayLink(vrf)),
    removeVrf: (vrf) => runPlan(plan.removeVrf(vrf)),
    async list() {
      // Read here, not by a forked `ls` on every heartbeat; none while the dir is absent.
      const names = (await readdir(opts.dir).catch(() => [] as string[])).sort()
      const states: VrfState[] = []
      for (const vrf of names) {
        const vni = vniOf(vrf)
        if (vni === undefined) continue
        const ns = plan.nsOf(vni)
        const { bridge } = vrfNames(vni)
        // One `ip` per VRF and heartbeat, not three: a fork costs the agent several ms of CPU.
        const [linksJson = '', routesJson = ''] = await batchOutput(
          ['ip', '-n', ns, '-j'],
          ['link show', 'route show table all'],
        )
        const links = parseLinks(linksJson)
        // Bound here, but its namespace is gone (a removal cut short): no VRF.
        if (links.length === 0) continue
        const vlan = vlanOf(links)
        states.push({
          vrf,
          vni,
          vlan,
          group: links.find((l) => l.ifname === bridge)?.ifalias ?? '',
          // Every port moved into the namespace, on the group interface or not (one left
          // off it by a configure cut short): removing the namespace would destroy it.
          ports: hostPortsOf(vni, links),
          hostRoutes: hostRoutesOf(routesJson),
        })
      }
      return states
    },
    inVrf: (vni) => ['ip', 'netns', 'exec', plan.nsOf(vni)],
    namespaceOf: (vni) => plan.nsOf(vni),
  }
}

// ------------------------------------------------------------------ reading back

function vniOf(vrf: string): number | undefined {
  const m = /^hzv(\d+)$/.exec(vrf)
  return m ? Number(m[1]) : undefined
}

interface Link {
  ifname: string
  ifalias?: string
  master?: string
}

function parseLinks(json: string): Link[] {
  try {
    const parsed = JSON.parse(json || '[]') as unknown
    return Array.isArray(parsed)
      ? parsed.filter((l): l is Link => typeof l?.ifname === 'string')
      : []
  } catch {
    return []
  }
}

/** The VLAN id of the group interface (`vlan<N>`) among a VRF's links. */
function vlanOf(links: readonly Link[]): number | undefined {
  for (const l of links) {
    const m = /^vlan(\d+)$/.exec(l.ifname)
    if (m) return Number(m[1])
  }
  return undefined
}

/** The host ports among a VRF's links: not its own devices, nor the relay's link. */
function hostPortsOf(vni: number, links: readonly Link[]): string[] {
  const { bridge, vxlan, relayLink } = vrfNames(vni)
  const own = new Set(['lo', bridge, vxlan, relayLink])
  return links.map((l) => l.ifname).filter((n) => !own.has(n) && !/^vlan\d+$/.test(n))
}

/**
 * The /32 and /128 routes on the group interface (the hosts'), from `ip -j route` outputs of
 * either family (`table all` lists both): unicast routes only, none of the local table's
 * or the kernel's (the gateway's own addresses).
 */
function hostRoutesOf(...outputs: string[]): string[] {
  const routes: string[] = []
  for (const json of outputs) {
    try {
      const parsed = JSON.parse(json || '[]') as {
        dst?: string
        dev?: string
        gateway?: string
        table?: string
        type?: string
        protocol?: string
      }[]
      for (const r of parsed) {
        if (!r.dst || r.gateway || r.dst.includes('/')) continue
        if (!r.dev?.startsWith('vlan')) continue
        // The kernel's own (an IPv6 gateway's /128) are not hosts': bgpd announces none.
        if (r.table === 'local' || r.protocol === 'kernel') continue
        if ((r.type ?? 'unicast') !== 'unicast') continue
        routes.push(`${r.dst}/${r.dst.includes(':') ? 128 : 32}`)
      }
    } catch {}
  }
  return routes
}

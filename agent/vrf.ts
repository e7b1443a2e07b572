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
 * same configuration serves both (`evpn.ts`). In the VRF, the host port carries the
 * group's gateway as a /32 (/128) and answers ARP for the group's other addresses
 * (proxy ARP), and the host's own /32 (/128) is a kernel route on the port: the route
 * FRR redistributes as the EVPN type-5 route.
 *
 * Each step is planned as a list of commands (pure, `plan…`), then run; a command that
 * finds its work done (a device that exists, a route already gone) is not an error, so a
 * step may run twice.
 */
import { execFile } from 'node:child_process'
import { isIPv4 } from 'node:net'
import { promisify } from 'node:util'

const exec = promisify(execFile)

/** One command: its argv, and what it may answer when its work is already done. */
export interface Command {
  readonly argv: readonly string[]
  readonly done?: RegExp
}

export interface VrfSpec {
  readonly vni: number
  /** The group the VRF belongs to (kept as the bridge's alias, for reports). */
  readonly group: string
  /** The DPU's VTEP address: the VXLAN device's source. */
  readonly vtep: string
}

export interface PortInVrf {
  readonly vni: number
  readonly port: string
  readonly gateways: readonly { address: string; prefixLength: number }[]
  readonly addresses: readonly string[]
  readonly mtu?: number | undefined
}

/** What a VRF holds, as the backend reads it back. */
export interface VrfState {
  readonly vrf: string
  readonly vni: number
  readonly group: string
  readonly ports: readonly string[]
  /** Host routes on its ports (`10.0.0.5/32`). */
  readonly hostRoutes: readonly string[]
}

/** Names FRR and the kernel know the group's VRF by. */
export const vrfNames = (vni: number) => ({
  vrf: `hzv${vni}`,
  bridge: `hzb${vni}`,
  vxlan: `hzx${vni}`,
})

const exists = /File exists|already exists/
const gone = /Cannot find device|No such process|does not exist|No such file|not found/i
const hostPrefix = (a: string) => `${a}/${isIPv4(a) ? 32 : 128}`
const gatewayPrefix = (a: string) => `${a}/${isIPv4(a) ? 32 : 128}`

export interface VrfBackend {
  readonly kind: 'kernel' | 'netns'
  /** Once, before the first VRF: what the backend needs on the DPU. */
  prepare(): Promise<void>
  ensureVrf(spec: VrfSpec): Promise<void>
  attach(port: PortInVrf): Promise<void>
  /** Withdraws the host's routes and takes the port out of the VRF. */
  detach(port: PortInVrf): Promise<void>
  removeVrf(vni: number): Promise<void>
  list(): Promise<VrfState[]>
  /** `ip …` argv prefix that runs inside the VRF (for a daemon in it: the DHCP relay). */
  inVrf(vni: number): readonly string[]
}

/** Runs planned commands in order; one whose work is done already is skipped. */
export async function runPlan(commands: readonly Command[]): Promise<void> {
  for (const c of commands) {
    const [file = '', ...args] = c.argv
    try {
      await exec(file, args, { timeout: 20_000 })
    } catch (err) {
      const stderr = String((err as { stderr?: string }).stderr ?? err)
      if (c.done?.test(stderr)) continue
      throw new Error(`${c.argv.join(' ')} failed: ${stderr.trim()}`)
    }
  }
}

async function output(argv: readonly string[]): Promise<string> {
  const [file = '', ...args] = argv
  return exec(file, args, { timeout: 20_000 })
    .then((r) => r.stdout)
    .catch(() => '')
}

// ------------------------------------------------------------------ kernel backend

/** The kernel VRF backend's table of VNI `vni`: above the kernel's own tables. */
export const vrfTable = (vni: number) => 1_000_000 + vni

/** The kernel backend's commands: pure, so that a test can read what a real DPU would run. */
export const kernelPlan = {
  ensureVrf({ vni, group, vtep }: VrfSpec): Command[] {
    const { vrf, bridge, vxlan } = vrfNames(vni)
    return [
      {
        argv: ['ip', 'link', 'add', vrf, 'type', 'vrf', 'table', String(vrfTable(vni))],
        done: exists,
      },
      { argv: ['ip', 'link', 'set', vrf, 'up'] },
      { argv: ['ip', 'link', 'add', bridge, 'type', 'bridge', 'stp_state', '0'], done: exists },
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
    ]
  },
  attach({ vni, port, gateways, addresses, mtu }: PortInVrf): Command[] {
    const { vrf, vxlan } = vrfNames(vni)
    return [
      // zebra may leave a VXLAN device it found mid-set-up protodown: the L3VNI is then down.
      { argv: ['ip', 'link', 'set', vxlan, 'protodown', 'off'] },
      { argv: ['ip', 'link', 'set', port, 'master', vrf] },
      ...(mtu ? [{ argv: ['ip', 'link', 'set', port, 'mtu', String(mtu)] }] : []),
      { argv: ['ip', 'link', 'set', port, 'up'] },
      ...gateways.map((g) => ({
        argv: ['ip', 'addr', 'add', gatewayPrefix(g.address), 'dev', port],
        done: exists,
      })),
      { argv: ['sysctl', '-qw', `net.ipv4.conf.${port}.proxy_arp=1`] },
      ...addresses.map((a) => ({
        argv: ['ip', 'route', 'replace', hostPrefix(a), 'dev', port, 'vrf', vrf],
      })),
    ]
  },
  detach({ vni, port, addresses }: PortInVrf): Command[] {
    const { vrf } = vrfNames(vni)
    return [
      ...addresses.map((a) => ({
        argv: ['ip', 'route', 'del', hostPrefix(a), 'vrf', vrf],
        done: gone,
      })),
      { argv: ['ip', 'addr', 'flush', 'dev', port], done: gone },
      { argv: ['ip', 'link', 'set', port, 'nomaster'], done: gone },
    ]
  },
  removeVrf(vni: number): Command[] {
    const { vrf, bridge, vxlan } = vrfNames(vni)
    return [vxlan, bridge, vrf].map((dev) => ({ argv: ['ip', 'link', 'del', dev], done: gone }))
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
    removeVrf: (vni) => runPlan(kernelPlan.removeVrf(vni)),
    async list() {
      const links = parseLinks(await output(['ip', '-j', '-d', 'link', 'show', 'type', 'vrf']))
      const states: VrfState[] = []
      for (const l of links) {
        const vni = vniOf(l.ifname)
        if (vni === undefined) continue
        const { bridge, vxlan } = vrfNames(vni)
        const members = parseLinks(await output(['ip', '-j', 'link', 'show', 'master', l.ifname]))
        const aliases = parseLinks(await output(['ip', '-j', 'link', 'show', bridge]))
        states.push({
          vrf: l.ifname,
          vni,
          group: aliases[0]?.ifalias ?? '',
          ports: members.map((m) => m.ifname).filter((n) => n !== bridge && n !== vxlan),
          hostRoutes: hostRoutesOf(
            await output(['ip', '-j', 'route', 'show', 'vrf', l.ifname]),
            await output(['ip', '-6', '-j', 'route', 'show', 'vrf', l.ifname]),
          ),
        })
      }
      return states
    },
    inVrf: (vni) => ['ip', 'vrf', 'exec', vrfNames(vni).vrf],
  }
}

// ------------------------------------------------------------------ netns backend

/** The netns backend's commands (the lab): pure, like the kernel backend's. */
export function netnsPlan(opts: { underlay?: string | undefined; dir: string }) {
  const u = opts.underlay
  const inUnderlay = (...argv: string[]) => (u ? ['ip', '-n', u, ...argv] : ['ip', ...argv])
  const nsOf = (vni: number) => `${u ?? 'hz'}-v${vni}`
  const view = (vni: number) => `${opts.dir}/${vrfNames(vni).vrf}`
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
    ensureVrf({ vni, group, vtep }: VrfSpec): Command[] {
      const ns = nsOf(vni)
      const { bridge, vxlan } = vrfNames(vni)
      const n = (...argv: string[]) => ['ip', '-n', ns, ...argv]
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
      ]
    },
    attach({ vni, port, gateways, addresses, mtu }: PortInVrf): Command[] {
      const ns = nsOf(vni)
      const n = (...argv: string[]) => ['ip', '-n', ns, ...argv]
      return [
        // zebra may leave a VXLAN device it found mid-set-up protodown: the L3VNI is then down.
        { argv: n('link', 'set', vrfNames(vni).vxlan, 'protodown', 'off') },
        {
          argv: [
            'sh',
            '-c',
            `ip -n ${ns} link show ${port} >/dev/null 2>&1 || ${inUnderlay('link', 'set', port, 'netns', ns).join(' ')}`,
          ],
        },
        ...(mtu ? [{ argv: n('link', 'set', port, 'mtu', String(mtu)) }] : []),
        { argv: n('link', 'set', port, 'up') },
        ...gateways.map((g) => ({
          argv: n(
            'addr',
            'add',
            gatewayPrefix(g.address),
            'dev',
            port,
            ...(isIPv4(g.address) ? [] : ['nodad']),
          ),
          done: exists,
        })),
        { argv: ['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `net.ipv4.conf.${port}.proxy_arp=1`] },
        ...addresses.map((a) => ({ argv: n('route', 'replace', hostPrefix(a), 'dev', port) })),
      ]
    },
    detach({ vni, port, addresses }: PortInVrf): Command[] {
      const ns = nsOf(vni)
      const n = (...argv: string[]) => ['ip', '-n', ns, ...argv]
      return [
        ...addresses.map((a) => ({ argv: n('route', 'del', hostPrefix(a)), done: gone })),
        { argv: n('addr', 'flush', 'dev', port), done: gone },
        // Back to the underlay, where a host port waits for its next job.
        {
          argv: [
            'sh',
            '-c',
            `! ip -n ${ns} link show ${port} >/dev/null 2>&1 || { ip -n ${ns} link set ${port} netns ${u ?? '1'} && ${inUnderlay('link', 'set', port, 'up').join(' ')}; }`,
          ],
        },
      ]
    },
    removeVrf(vni: number): Command[] {
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
    removeVrf: (vni) => runPlan(plan.removeVrf(vni)),
    async list() {
      const names = (await output(['ls', opts.dir])).split('\n').filter(Boolean)
      const states: VrfState[] = []
      for (const vrf of names) {
        const vni = vniOf(vrf)
        if (vni === undefined) continue
        const ns = plan.nsOf(vni)
        const { bridge, vxlan } = vrfNames(vni)
        const links = parseLinks(await output(['ip', '-n', ns, '-j', 'link', 'show']))
        // Bound here, but its namespace is gone (a removal cut short): no VRF.
        if (links.length === 0) continue
        states.push({
          vrf,
          vni,
          group: links.find((l) => l.ifname === bridge)?.ifalias ?? '',
          ports: links
            .map((l) => l.ifname)
            .filter((n) => n !== 'lo' && n !== bridge && n !== vxlan),
          hostRoutes: hostRoutesOf(
            await output(['ip', '-n', ns, '-j', 'route', 'show']),
            await output(['ip', '-n', ns, '-6', '-j', 'route', 'show']),
          ),
        })
      }
      return states
    },
    inVrf: (vni) => ['ip', 'netns', 'exec', plan.nsOf(vni)],
  }
}

// ------------------------------------------------------------------ reading back

function vniOf(vrf: string): number | undefined {
  const m = /^hzv(\d+)$/.exec(vrf)
  return m ? Number(m[1]) : undefined
}

function parseLinks(json: string): { ifname: string; ifalias?: string }[] {
  try {
    const parsed = JSON.parse(json || '[]') as unknown
    return Array.isArray(parsed)
      ? parsed.filter(
          (l): l is { ifname: string; ifalias?: string } => typeof l?.ifname === 'string',
        )
      : []
  } catch {
    return []
  }
}

/** The /32 and /128 routes out of a port (the hosts'), from `ip -j route`. */
function hostRoutesOf(v4: string, v6: string): string[] {
  const routes: string[] = []
  for (const [json, full] of [
    [v4, 32],
    [v6, 128],
  ] as const) {
    try {
      const parsed = JSON.parse(json || '[]') as { dst?: string; dev?: string; gateway?: string }[]
      for (const r of parsed) {
        if (!r.dst || r.gateway || r.dst.includes('/')) continue
        if (r.dev?.startsWith('hzb')) continue
        routes.push(`${r.dst}/${full}`)
      }
    } catch {}
  }
  return routes
}

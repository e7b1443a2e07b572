/**
 * A simulated DPU lab on one Linux machine, as root and without the OVS kernel module:
 *
 * - a fabric: a Linux bridge in the root namespace with a gateway address (OVN centrals
 *   and Redis listen there, as they would on the management/fabric network);
 * - DPUs: each its own network namespace running `ovsdb-server` (vswitch schema) and
 *   `ovs-vswitchd` with the userspace `netdev` datapath, an uplink veth to the fabric
 *   in `br-phy`, and the encap IP on `br-phy` (the DPU's base provisioning, before any
 *   agent runs);
 * - hosts: network namespaces with one veth whose other end lies in the DPU namespace
 *   (the host's port, as a representor is on real hardware). The DPU-side ends are
 *   named like BlueField's representors (`pf0hpf`, `pf1hpf`, `pf0vf0`, …): the fixed
 *   set of host ports the DPU's agent is allowed to bind (`hostPorts`).
 *
 * Every namespace and link is named from `prefix`, so parallel test runs do not meet;
 * `destroy()` removes them (and is safe to call twice).
 *
 * @example
 * const fabric = await createFabric({ prefix: labPrefix() })
 * const dpu = await createDpu({ fabric, name: 'dpu1', dataDir })
 * const host = await dpu.addHost({ name: 'h1', mac: '0a:00:00:00:00:01' })
 * // ... run the agent against dpu.ovsDb, with daemons in dpu.netns
 * await dpu.destroy(); await fabric.destroy()
 */
import { execFile } from 'node:child_process'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { canConnect } from '../../lib/process/ports.ts'

const exec = promisify(execFile)

let runCounter = 0

/**
 * A short name prefix unique to this process and call (`hz` + base-36 pid + counter), so
 * that `<prefix>` plus a 4-character suffix still fits a 15-character interface name.
 */
export function labPrefix(): string {
  return `hz${process.pid.toString(36)}${(runCounter++).toString(36)}`
}

/** Runs a command, throwing with its stderr when it fails. */
export async function run(command: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await exec(command, args, { timeout: 20_000 })
    return stdout
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? ''
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || String(err)}`)
  }
}

const ip = (...args: string[]) => run('ip', args)
const quietly = (p: Promise<unknown>) => p.then(() => undefined).catch(() => undefined)

/** Turns off transmit checksum offload: needed for TCP and Geneve over veth + netdev. */
async function txOff(ifname: string, netns?: string): Promise<void> {
  const argv = ['-K', ifname, 'tx', 'off']
  if (netns) await run('ip', ['netns', 'exec', netns, 'ethtool', ...argv])
  else await run('ethtool', argv)
}

export interface Fabric {
  readonly prefix: string
  /** The Linux bridge in the root namespace. */
  readonly bridge: string
  /** The root namespace's address on the fabric: listen here for DPUs to reach you. */
  readonly gatewayIp: string
  readonly prefixLength: number
  /** The next free fabric address (for a DPU uplink). */
  allocateIp(): string
  destroy(): Promise<void>
}

/** Creates the fabric bridge with a /24 out of 100.64.0.0/10 derived from the pid. */
export async function createFabric(opts: { prefix: string }): Promise<Fabric> {
  const bridge = `${opts.prefix}fab`
  const b = 64 + ((process.pid >> 8) % 64)
  const c = (process.pid + runCounter * 37) % 256
  const base = `100.${b}.${c}`
  await quietly(ip('link', 'del', bridge))
  await ip('link', 'add', bridge, 'type', 'bridge')
  await ip('addr', 'add', `${base}.1/24`, 'dev', bridge)
  await ip('link', 'set', bridge, 'up')
  let next = 2
  return {
    prefix: opts.prefix,
    bridge,
    gatewayIp: `${base}.1`,
    prefixLength: 24,
    allocateIp: () => `${base}.${next++}`,
    destroy: () => quietly(ip('link', 'del', bridge)),
  }
}

/** The host ports every simulated DPU has, in the order `addHost` hands them out. */
export const SIM_HOST_PORTS = ['pf0hpf', 'pf1hpf', 'pf0vf0', 'pf0vf1', 'pf0vf2', 'pf0vf3'] as const

export interface SimHost {
  readonly name: string
  /** The host's network namespace (its one interface is `eth0`). */
  readonly netns: string
  readonly mac: string
  /** The DPU-side end of the host's veth: the agent's `hostPort`. */
  readonly hostPort: string
}

export interface SimDpu {
  readonly name: string
  readonly netns: string
  readonly dataDir: string
  /** `unix:` remote of the DPU's Open_vSwitch database. */
  readonly ovsDb: string
  /** OVS_RUNDIR of this DPU: ovn-controller must use the same one as ovs-vswitchd. */
  readonly ovsRunDir: string
  readonly uplinkBridge: string
  /** The uplink veth end inside the DPU namespace (a port of `uplinkBridge`). */
  readonly uplinkInterface: string
  /** The uplink veth's other end: the fabric bridge's port this DPU is plugged into. */
  readonly fabricPort: string
  /** The DPU's fabric/encap address (on `uplinkBridge`). */
  readonly encapIp: string
  /** The interfaces hosts are attached to (the agent's `--host-ports`), `SIM_HOST_PORTS`. */
  readonly hostPorts: readonly string[]
  /**
   * Adds a host namespace whose veth ends in this DPU namespace (not yet in any bridge),
   * on the next free of `hostPorts`. With `into`, the veth is another interface
   * (`ifname`) of that existing host namespace instead: a host with a NIC on each of
   * two DPUs.
   */
  addHost(opts: {
    name: string
    mac: string
    ipCidr?: string
    into?: { netns: string; ifname: string }
  }): Promise<SimHost>
  /** `ovs-vsctl` against this DPU's database: for tests to observe, not to configure. */
  vsctl(...args: string[]): Promise<string>
  destroy(): Promise<void>
}

/**
 * Creates a simulated DPU attached to `fabric`: namespace, uplink veth, ovsdb-server,
 * ovs-vswitchd (netdev), `br-phy` holding the uplink with the encap IP.
 */
export async function createDpu(opts: {
  fabric: Fabric
  name: string
  dataDir: string
  /** Its uplink's fabric address; by default the fabric's next (`allocateIp`). */
  encapIp?: string
}): Promise<SimDpu> {
  const { fabric } = opts
  const tag = `${fabric.prefix}${opts.name}`.slice(0, 12)
  const netns = `${fabric.prefix}-${opts.name}`
  const dir = join(opts.dataDir, opts.name)
  await mkdir(dir, { recursive: true })
  const daemons: Daemon[] = []
  const hosts: string[] = []
  let destroyed = false

  const destroy = async () => {
    if (destroyed) return
    destroyed = true
    for (const d of daemons.reverse()) await d.stop().catch(() => {})
    for (const h of hosts) await quietly(ip('netns', 'del', h))
    // The agent's relay namespaces are named `<DPU netns>-<relay port>`: `hzr…` for an
    // Overlay group's, `vlan<N>` for a Fabric group's.
    const relayNamespaces = (await ip('netns', 'list').catch(() => ''))
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '')
      .filter((n) => n.startsWith(`${netns}-hzr`) || n.startsWith(`${netns}-vlan`))
    for (const n of relayNamespaces) await quietly(ip('netns', 'del', n))
    // Fabric groups' VRF namespaces (`<DPU netns>-v<VNI>`) and the directory the agent
    // bound them into for its zebra (a mount of its own).
    await quietly(run('umount', ['-R', '-l', join(dir, 'vrfs')]))
    const vrfNamespaces = (await ip('netns', 'list').catch(() => ''))
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '')
      .filter((n) => /-v\d+$/.test(n) && n.startsWith(`${netns}-v`))
    for (const n of vrfNamespaces) await quietly(ip('netns', 'del', n))
    await quietly(ip('netns', 'del', netns))
    await quietly(ip('link', 'del', `${tag}u`))
  }

  try {
    await quietly(ip('netns', 'del', netns))
    await ip('netns', 'add', netns)
    await ip('-n', netns, 'link', 'set', 'lo', 'up')

    // Uplink: root end on the fabric bridge, the other end `eth0` in the DPU.
    const uplinkInterface = 'eth0'
    await quietly(ip('link', 'del', `${tag}u`))
    await ip('link', 'add', `${tag}u`, 'type', 'veth', 'peer', 'name', `${tag}U`)
    await ip('link', 'set', `${tag}U`, 'netns', netns)
    await ip('-n', netns, 'link', 'set', `${tag}U`, 'name', uplinkInterface)
    await ip('link', 'set', `${tag}u`, 'master', fabric.bridge)
    await ip('link', 'set', `${tag}u`, 'up')
    await ip('-n', netns, 'link', 'set', uplinkInterface, 'up')
    await txOff(`${tag}u`)
    await txOff(uplinkInterface, netns)

    const env = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVN_RUNDIR: dir }
    const dbFile = join(dir, 'conf.db')
    const dbSock = join(dir, 'db.sock')
    await run('ovsdb-tool', ['create', dbFile, '/usr/share/openvswitch/vswitch.ovsschema'])
    daemons.push(
      await startDaemon({
        name: `ovsdb-server(${opts.name})`,
        command: 'ovsdb-server',
        args: [
          dbFile,
          `--remote=punix:${dbSock}`,
          `--unixctl=${join(dir, 'ovsdb-server.ctl')}`,
          `--pidfile=${join(dir, 'ovsdb-server.pid')}`,
          `--log-file=${join(dir, 'ovsdb-server.log')}`,
        ],
        env,
        netns,
        logFile: join(dir, 'ovsdb-server.out'),
        ready: () => canConnect({ path: dbSock }),
      }),
    )
    const ovsDb = `unix:${dbSock}`
    const vsctl = (...args: string[]) =>
      run('ovs-vsctl', [`--db=${ovsDb}`, '--timeout=10', ...args])
    await vsctl('--no-wait', 'init')
    const vswitchdCtl = join(dir, 'ovs-vswitchd.ctl')
    daemons.push(
      await startDaemon({
        name: `ovs-vswitchd(${opts.name})`,
        command: 'ovs-vswitchd',
        args: [
          ovsDb,
          `--unixctl=${vswitchdCtl}`,
          `--pidfile=${join(dir, 'ovs-vswitchd.pid')}`,
          `--log-file=${join(dir, 'ovs-vswitchd.log')}`,
        ],
        env,
        netns,
        logFile: join(dir, 'ovs-vswitchd.out'),
        ready: () => canConnect({ path: vswitchdCtl }),
      }),
    )

    // Base provisioning: br-phy (netdev) holds the uplink and carries the encap IP.
    const uplinkBridge = 'br-phy'
    const encapIp = opts.encapIp ?? fabric.allocateIp()
    await vsctl(
      '--may-exist',
      'add-br',
      uplinkBridge,
      '--',
      'set',
      'Bridge',
      uplinkBridge,
      'datapath_type=netdev',
      '--',
      '--may-exist',
      'add-port',
      uplinkBridge,
      uplinkInterface,
    )
    await ip('-n', netns, 'addr', 'add', `${encapIp}/${fabric.prefixLength}`, 'dev', uplinkBridge)
    await ip('-n', netns, 'link', 'set', uplinkBridge, 'up')
    await txOff(uplinkBridge, netns)

    let hostCount = 0
    return {
      name: opts.name,
      netns,
      dataDir: dir,
      ovsDb,
      ovsRunDir: dir,
      uplinkBridge,
      uplinkInterface,
      fabricPort: `${tag}u`,
      encapIp,
      hostPorts: SIM_HOST_PORTS,
      vsctl,
      destroy,
      async addHost(h) {
        const i = hostCount++
        const hostPort = SIM_HOST_PORTS[i]
        if (!hostPort) throw new Error(`DPU ${opts.name} has no host port left for ${h.name}`)
        const hostNs = h.into?.netns ?? `${fabric.prefix}-${opts.name}-${h.name}`
        const dev = h.into?.ifname ?? 'eth0'
        const a = `${tag}h${i}`
        const b = `${tag}H${i}`
        if (!h.into) {
          await quietly(ip('netns', 'del', hostNs))
          await ip('netns', 'add', hostNs)
          hosts.push(hostNs)
        }
        await ip('link', 'add', a, 'type', 'veth', 'peer', 'name', b)
        await ip('link', 'set', a, 'netns', hostNs)
        await ip('link', 'set', b, 'netns', netns)
        await ip('-n', hostNs, 'link', 'set', a, 'name', dev)
        await ip('-n', netns, 'link', 'set', b, 'name', hostPort)
        await ip('-n', hostNs, 'link', 'set', dev, 'address', h.mac)
        if (h.ipCidr) await ip('-n', hostNs, 'addr', 'add', h.ipCidr, 'dev', dev)
        await ip('-n', hostNs, 'link', 'set', 'lo', 'up')
        await ip('-n', hostNs, 'link', 'set', dev, 'up')
        await ip('-n', netns, 'link', 'set', hostPort, 'up')
        await txOff(dev, hostNs)
        await txOff(hostPort, netns)
        return { name: h.name, netns: hostNs, mac: h.mac, hostPort }
      },
    }
  } catch (err) {
    await destroy()
    throw err
  }
}

/**
 * The lab's DHCP server, standing in for Carbide's: dnsmasq on the fabric bridge, serving
 * each group's relay (told apart by the relay's circuit id) a subnet and fixed leases,
 * and logging every exchange with the relay agent information it carried.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'

export interface DhcpEntry {
  readonly circuitId: string
  readonly cidr: string
  readonly gateway: string
  readonly leases: readonly { mac: string; ip: string }[]
}

export interface DhcpServer {
  /** dnsmasq's log: each DHCP exchange with the relay agent information it carried. */
  readonly log: string
  /**
   * (Re)starts dnsmasq serving `entries`: per relay circuit id (the agent's relay port
   * name), a subnet and fixed MAC → IP leases.
   */
  configure(entries: readonly DhcpEntry[]): Promise<void>
  /** Stops dnsmasq, if it runs. */
  stop(): Promise<void>
}

/**
 * A DHCP server on `bridge` keeping its files in `dataDir`. Nothing runs until the first
 * `configure`.
 */
export function dhcpServer(opts: { bridge: string; dataDir: string }): DhcpServer {
  const { dataDir } = opts
  const log = join(dataDir, 'dnsmasq.log')
  let dnsmasq: Daemon | undefined
  const stop = async () => {
    const d = dnsmasq
    dnsmasq = undefined
    await d?.stop()
  }
  const configure = async (entries: readonly DhcpEntry[]) => {
    await stop()
    const args = [
      '--keep-in-foreground',
      '--port=0',
      `--interface=${opts.bridge}`,
      '--bind-interfaces',
      '--log-dhcp',
      `--log-facility=${log}`,
      `--dhcp-leasefile=${join(dataDir, 'dnsmasq.leases')}`,
      `--pid-file=${join(dataDir, 'dnsmasq.pid')}`,
      '--dhcp-authoritative',
    ]
    entries.forEach((e, i) => {
      const tag = `g${i}`
      const [network = '', len = '24'] = e.cidr.split('/')
      args.push(
        `--dhcp-circuitid=set:${tag},${e.circuitId}`,
        `--dhcp-range=tag:${tag},${network},static,${maskOf(Number(len))},1h`,
        `--dhcp-option=tag:${tag},option:router,${e.gateway}`,
      )
      for (const l of e.leases) args.push(`--dhcp-host=${l.mac},${l.ip}`)
    })
    dnsmasq = await startDaemon({
      name: 'dnsmasq',
      command: 'dnsmasq',
      args,
      logFile: join(dataDir, 'dnsmasq.out'),
      ready: async () => (await readFile(log, 'utf8').catch(() => '')).includes('DHCP'),
    })
  }
  return { log, configure, stop }
}

/** The dotted netmask of a prefix length: 24 → 255.255.255.0. */
function maskOf(len: number): string {
  const bits = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0
  return [24, 16, 8, 0].map((s) => (bits >>> s) & 255).join('.')
}

/**
 * The real DPU agent (`agent/main.ts`) started on a simulated DPU, its daemons in the
 * DPU's namespace, pointed at Hydrazine's Redis: up once Hydrazine lists the DPU.
 */
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import type { SimDpu } from './dpu.ts'
import type { LabHydrazine } from './hydrazine.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/** Starts the agent of `sim` as DPU `id` and waits until its heartbeat reached Hydrazine. */
export function startDpuAgent(opts: {
  id: string
  sim: SimDpu
  /** The DPU's NAT IP: its second fabric address, one only OVN answers for. */
  natIp: string
  /** Fabric addresses (with prefix length) for this DPU's DHCP relays, one per group. */
  relayUplinkIps: readonly string[]
  hydrazine: Pick<LabHydrazine, 'redisUrl' | 'api'>
}): Promise<Daemon> {
  const { id, sim, hydrazine } = opts
  const flags: [string, string][] = [
    ['dpu-id', id],
    ['fabric-ips', `${sim.encapIp},${opts.natIp}`],
    ['ovs-db', sim.ovsDb],
    ['ovs-rundir', sim.ovsRunDir],
    ['redis-url', hydrazine.redisUrl],
    ['grpc-listen', '127.0.0.1:0'],
    ['run-dir', join(sim.dataDir, 'agent')],
    ['netns', sim.netns],
    ['datapath-type', 'netdev'],
    ['uplink-bridge', sim.uplinkBridge],
    ['uplink-interface', sim.uplinkInterface],
    ['bridge-mappings', `physnet:${sim.uplinkBridge}`],
    ['host-ports', sim.hostPorts.join(',')],
    ['relay-uplink-ips', opts.relayUplinkIps.join(',')],
    ['heartbeat-ms', '1000'],
    ['install-timeout-ms', '30000'],
    ['lock-ms', '10000'],
  ]
  return startDaemon({
    name: `agent(${id})`,
    command: process.execPath,
    args: ['--import', 'tsx', 'agent/main.ts', ...flags.flatMap(([f, v]) => [`--${f}`, v])],
    cwd: repo,
    logFile: join(sim.dataDir, 'agent.log'),
    ready: async () => {
      const answer = await hydrazine.api('GET', '/v1/dpus').catch(() => undefined)
      const items = (answer?.body as { items?: { id: string }[] } | undefined)?.items ?? []
      return items.some((d) => d.id === id)
    },
    readyTimeoutMs: 30_000,
  })
}

/**
 * The real DPU agent (`agent/main.ts`) started on a simulated DPU, its daemons in the
 * DPU's namespace, pointed at Hydrazine's Redis: up once Hydrazine lists the DPU.
 *
 * As an operator provisions a DPU: the DPU goes into Hydrazine's inventory (its fabric
 * IPs and host ports), and `POST /v1/dpus/{id}/credentials` issues its agent's Redis user
 * (confined to its own queue and heartbeat) and its certificate (CN = the DPU id). The
 * agent gets them as files (0600) and `REDIS_URL` in its environment, out of the process
 * list: Redis is `rediss://` (`--redis-ca`), the SB `ssl:` with OVN RBAC and the agent's
 * gRPC mTLS (`--tls-cert/--tls-key/--tls-ca`).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as v from 'valibot'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import type { SimDpu } from './dpu.ts'
import type { LabHydrazine } from './hydrazine.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/** What `POST /v1/dpus/{id}/credentials` answers (with a PKI, as the lab's Hydrazine runs). */
const Credentials = v.object({
  redis: v.object({ username: v.string(), password: v.string() }),
  tls: v.object({
    cert: v.string(),
    key: v.string(),
    ca: v.string(),
    serverCert: v.optional(v.string()),
  }),
})

/** Where a lab DPU's agent keeps its daemons' pid, log and control files (`--run-dir`). */
export function agentRunDir(sim: Pick<SimDpu, 'dataDir'>): string {
  return join(sim.dataDir, 'agent')
}

/** Starts the agent of `sim` as DPU `id` and waits until Hydrazine sees it Online (heartbeating). */
export async function startDpuAgent(opts: {
  id: string
  sim: SimDpu
  /** The DPU's NAT IP: its second fabric address, one only OVN answers for. */
  natIp: string
  /** Its IPv6 NAT address (the inventory's `natIp6`), one only OVN answers for. */
  natIp6: string
  /** Fabric addresses (with prefix length) for this DPU's DHCP relays, one per group. */
  relayUplinkIps: readonly string[]
  /** The fabric's EVPN route reflectors: given, the agent takes Fabric groups' hosts. */
  evpnPeers?: readonly string[]
  hydrazine: Pick<LabHydrazine, 'redisUrl' | 'caFile' | 'api'>
}): Promise<Daemon> {
  const { id, sim, hydrazine } = opts
  const inventory = await hydrazine.api('PUT', `/v1/dpus/${id}`, {
    fabricIps: [sim.encapIp, opts.natIp],
    natIp6: opts.natIp6,
    hostPorts: sim.hostPorts,
  })
  if (inventory.status >= 300)
    throw new Error(`cannot add ${id} to the inventory: ${JSON.stringify(inventory.body)}`)
  const issued = await hydrazine.api('POST', `/v1/dpus/${id}/credentials`)
  const parsed = v.safeParse(Credentials, issued.body)
  if (!parsed.success) throw new Error(`no credentials for ${id}: ${JSON.stringify(issued.body)}`)
  const creds = parsed.output
  const dir = join(sim.dataDir, 'credentials')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const file = async (name: string, content: string) => {
    await writeFile(join(dir, name), content, { mode: 0o600 })
    return join(dir, name)
  }
  const redisUrl = new URL(hydrazine.redisUrl)
  redisUrl.username = creds.redis.username
  redisUrl.password = creds.redis.password
  const flags: [string, string][] = [
    ['tls-cert', await file('dpu.crt', creds.tls.cert)],
    ['tls-key', await file('dpu.key', creds.tls.key)],
    ['tls-ca', await file('ca.crt', creds.tls.ca)],
    ...(creds.tls.serverCert
      ? [
          ['tls-server-cert', await file('dpu-server.crt', creds.tls.serverCert)] as [
            string,
            string,
          ],
        ]
      : []),
    ['redis-ca', hydrazine.caFile],
    ['dpu-id', id],
    ['fabric-ips', `${sim.encapIp},${opts.natIp}`],
    ['ovs-db', sim.ovsDb],
    ['ovs-rundir', sim.ovsRunDir],
    ['grpc-listen', '127.0.0.1:0'],
    ['run-dir', agentRunDir(sim)],
    ['netns', sim.netns],
    ['datapath-type', 'netdev'],
    ['uplink-bridge', sim.uplinkBridge],
    ['uplink-interface', sim.uplinkInterface],
    ['bridge-mappings', `physnet:${sim.uplinkBridge}`],
    ['host-ports', sim.hostPorts.join(',')],
    ['relay-uplink-ips', opts.relayUplinkIps.join(',')],
    ...(opts.evpnPeers?.length
      ? ([
          ['evpn-peers', opts.evpnPeers.join(',')],
          // No VRF device on this kernel: each Fabric group's VRF is a namespace.
          ['vrf-backend', 'netns'],
          ['vrf-netns-dir', join(sim.dataDir, 'vrfs')],
        ] as [string, string][])
      : []),
    ['heartbeat-ms', '1000'],
    ['install-timeout-ms', '30000'],
    ['lock-ms', '10000'],
  ]
  return startDaemon({
    name: `agent(${id})`,
    command: process.execPath,
    args: ['--import', 'tsx', 'agent/main.ts', ...flags.flatMap(([f, v]) => [`--${f}`, v])],
    cwd: repo,
    env: { REDIS_URL: redisUrl.toString() },
    logFile: join(sim.dataDir, 'agent.log'),
    ready: async () => {
      const answer = await hydrazine.api('GET', '/v1/dpus').catch(() => undefined)
      const items =
        (answer?.body as { items?: { id: string; state?: string }[] } | undefined)?.items ?? []
      // Listed from the inventory at once: up once its agent's heartbeat is fresh.
      return items.some((d) => d.id === id && d.state === 'Online')
    },
    readyTimeoutMs: 30_000,
  })
}

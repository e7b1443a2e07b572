/**
 * Hydrazine in the lab: `infra/main.ts` run as `npm start` runs it, its embedded Redis,
 * OVN central and FRR listening on the fabric, and a client for its HTTP API — the only
 * way the lab drives it. The fabric is not loopback, so Redis speaks TLS only and the SB
 * is `pssl:` with OVN's RBAC: what an agent needs to connect comes back from here.
 */
import { mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import type { Fabric } from './dpu.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))

export const HYDRAZINE_ASN = 65000

export interface ApiAnswer {
  readonly status: number
  readonly body: unknown
}

export interface LabHydrazine {
  /** The HTTP API base URL, the operator token and the file holding it. */
  readonly url: string
  readonly token: string
  readonly tokenFile: string
  /**
   * Redis for agents: `rediss://default:PASSWORD@<fabric gateway>:PORT` (TLS only off
   * loopback). Secret: give it to an agent through its environment, never as a flag.
   */
  readonly redisUrl: string
  /** The CA of Hydrazine's PKI: Redis's and the SB's server certificates chain to it. */
  readonly caFile: string
  /** NB (unix socket): tests observe it. */
  readonly nbRemote: string
  /** SB for chassis: `ssl:<fabric gateway>:PORT` (RBAC role ovn-controller). */
  readonly sbRemote: string
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>
}

/**
 * Starts Hydrazine with its files in `<dataDir>/hydrazine`, its BGP speaker at the fabric
 * gateway peering with `router`, and waits until its HTTP API answers. The process goes
 * to `started` as soon as it runs, so the lab stops it even if a later step fails.
 */
export async function startHydrazine(opts: {
  dataDir: string
  fabric: Fabric
  /** `HYDRAZINE_FABRIC_DUMMY_IP`: a reserved fabric address with its prefix length. */
  dummyIp: string
  router: { ip: string; asn: number }
  started: (daemon: Daemon) => void
}): Promise<LabHydrazine> {
  const { dataDir, fabric, router } = opts
  const hzDir = join(dataDir, 'hydrazine')
  await mkdir(hzDir, { recursive: true })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const hzLog = join(dataDir, 'hydrazine.log')
  opts.started(
    await startDaemon({
      name: 'hydrazine',
      command: process.execPath,
      args: ['--import', 'tsx', 'infra/main.ts'],
      cwd: repo,
      env: {
        HYDRAZINE_DATA_DIR: hzDir,
        HYDRAZINE_HTTP_PORT: String(port),
        HYDRAZINE_GRPC_PORT: String(await freePort()),
        HYDRAZINE_EMBEDDED_LISTEN: fabric.gatewayIp,
        // The lab's checks read one NB; per-group centrals are proven by the pipeline tests.
        HYDRAZINE_OVN_CENTRAL: 'shared',
        HYDRAZINE_BGP_ASN: String(HYDRAZINE_ASN),
        HYDRAZINE_BGP_ROUTER_ID: fabric.gatewayIp,
        HYDRAZINE_BGP_PEERS: `${router.ip}:${router.asn}`,
        HYDRAZINE_FABRIC_DUMMY_IP: opts.dummyIp,
        HYDRAZINE_FABRIC_GATEWAY: router.ip,
        HYDRAZINE_PHYSICAL_NETWORK: 'physnet',
        // dnsmasq on the fabric, standing in for Carbide's DHCP server.
        HYDRAZINE_DHCP_SERVERS: fabric.gatewayIp,
        LOG_LEVEL: 'info',
      },
      logFile: hzLog,
      ready: async () => {
        try {
          return (await fetch(`${url}/healthz`)).ok
        } catch {
          return false
        }
      },
      readyTimeoutMs: 60_000,
    }),
  )
  const hzOut = await readFile(hzLog, 'utf8')
  const redis =
    /redis-server listening on (rediss?):\/\/([0-9.]+):(\d+) \(password in ([^)\s]+)\)/.exec(hzOut)
  const sb = /ovsdb-server\(sb\) on unix:\S+ and ((?:tcp|ssl):[0-9.]+:\d+)/.exec(hzOut)
  const nb = /ovsdb-server\(nb\) on (unix:[^\s"]+)/.exec(hzOut)
  if (!redis || !sb || !nb) throw new Error(`cannot find Redis/OVN endpoints in ${hzLog}`)
  const password = (await readFile(redis[4] ?? '', 'utf8')).trim()
  const pkiDir = join(hzDir, 'pki')
  const tokenFile = join(hzDir, 'operator-token')
  const token = (await readFile(tokenFile, 'utf8')).trim()

  const api = async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {}
    return { status: res.status, body: parsed }
  }

  return {
    url,
    token,
    tokenFile,
    redisUrl: `${redis[1]}://default:${password}@${redis[2]}:${redis[3]}`,
    caFile: join(pkiDir, 'ca.crt'),
    nbRemote: nb[1] ?? '',
    sbRemote: sb[1] ?? '',
    api,
  }
}

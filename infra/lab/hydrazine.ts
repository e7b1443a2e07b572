/**
 * Hydrazine in the lab: `infra/main.ts` run as `npm start` runs it, with its defaults —
 * embedded Redis and FRR, and one OVN central per resource group, all listening on the
 * fabric — and a client for its HTTP API, the only way the lab drives it. The fabric is
 * not loopback, so Redis speaks TLS only and each group's SB is `pssl:` with OVN's RBAC:
 * what an agent needs to connect comes back from here.
 */
import { mkdir, readFile, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { centralDir, centralsRoot } from '../centrals/local.ts'
import { withPortRetry } from '../local/net.ts'
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
   * The agents' Redis: `rediss://default:PASSWORD@<fabric gateway>:PORT` (TLS only off
   * loopback, a client certificate required). Secret: give it to an agent through its
   * environment, never as a flag.
   */
  readonly redisUrl: string
  /** The controller's client certificate and key at the agents' Redis (admin reads). */
  readonly redisClient: { readonly certFile: string; readonly keyFile: string }
  /** The CA of Hydrazine's PKI: Redis's and the SB's server certificates chain to it. */
  readonly caFile: string
  /** Where the groups' OVN centrals live: one directory each (`LabCentral.dir`). */
  readonly centralsDir: string
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>
  /**
   * The OVN central of `group`, as its status tells (`ovnCentral`): there once the group
   * has been created. Throws when the group has none (yet).
   */
  central(group: string): Promise<LabCentral>
}

/** A resource group's OVN central (NB + SB ovsdb-server and ovn-northd). */
export interface LabCentral {
  readonly group: string
  /** NB (unix socket): tests observe it, never configure it. */
  readonly nb: string
  /** SB for the group's chassis: `ssl:<fabric gateway>:PORT` (RBAC role ovn-controller). */
  readonly sb: string
  /**
   * Its directory: databases, sockets, logs and pid files (`nb.pid`, `sb.pid`,
   * `northd.pid`), as `infra/centrals/local.ts` lays it out.
   */
  readonly dir: string
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
  /** `HYDRAZINE_FABRIC_DUMMY_IP6`: the same in IPv6. */
  dummyIp6: string
  router: { ip: string; ip6: string; asn: number }
  /**
   * `HYDRAZINE_ADMIN_NETWORK`: the admin network's group `admin` on this network, relaying
   * DHCP to the lab's DHCP server. Absent: none.
   */
  adminNetwork?: { cidr: string; gateway: string }
  /** `HYDRAZINE_GENEVE_IPSEC=true`: the Geneve tunnels between DPUs are IPsec. */
  geneveIpsec?: boolean
  started: (daemon: Daemon) => void
}): Promise<LabHydrazine> {
  const { dataDir, fabric, router } = opts
  // Absolute: Hydrazine runs in the repository, and the lab finds its centrals here.
  const hzDir = resolve(dataDir, 'hydrazine')
  await mkdir(hzDir, { recursive: true })
  const hzLog = join(dataDir, 'hydrazine.log')
  const startHydrazineDaemon = async (port: number, url: string) =>
    startDaemon({
      name: 'hydrazine',
      command: process.execPath,
      args: ['--import', 'tsx', 'infra/main.ts'],
      cwd: repo,
      env: {
        HYDRAZINE_DATA_DIR: hzDir,
        HYDRAZINE_HTTP_PORT: String(port),
        HYDRAZINE_GRPC_PORT: String(await freePort()),
        HYDRAZINE_METRICS_LISTEN: `127.0.0.1:${await freePort()}`,
        HYDRAZINE_EMBEDDED_LISTEN: fabric.gatewayIp,
        HYDRAZINE_BGP_ASN: String(HYDRAZINE_ASN),
        HYDRAZINE_BGP_ROUTER_ID: fabric.gatewayIp,
        HYDRAZINE_BGP_PEERS: `${router.ip}:${router.asn}`,
        HYDRAZINE_FABRIC_DUMMY_IP: opts.dummyIp,
        HYDRAZINE_FABRIC_GATEWAY: router.ip,
        HYDRAZINE_FABRIC_DUMMY_IP6: opts.dummyIp6,
        HYDRAZINE_FABRIC_GATEWAY6: router.ip6,
        HYDRAZINE_PHYSICAL_NETWORK: 'physnet',
        // Fabric groups: the DPUs' FRR speak EVPN in the fabric router's AS.
        HYDRAZINE_FABRIC_ASN: String(router.asn),
        // dnsmasq on the fabric, standing in for Carbide's DHCP server.
        HYDRAZINE_DHCP_SERVERS: fabric.gatewayIp,
        ...(opts.adminNetwork
          ? {
              HYDRAZINE_ADMIN_NETWORK: JSON.stringify({
                group: 'admin',
                network: opts.adminNetwork,
                dhcpServer: fabric.gatewayIp,
              }),
            }
          : {}),
        ...(opts.geneveIpsec ? { HYDRAZINE_GENEVE_IPSEC: 'true' } : {}),
        LOG_LEVEL: 'info',
        // The agents beat every second: look at their beats four times as often.
        HYDRAZINE_DPU_HEALTH_MS: '250',
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
    })
  // Its ports are picked free and bound by Hydrazine a moment later: one taken in between
  // (another process of the machine) is picked again. The log is appended to: what this
  // start wrote begins where the file ended.
  const { url, logFrom } = await withPortRetry(async () => {
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const logFrom = (await stat(hzLog).catch(() => undefined))?.size ?? 0
    opts.started(await startHydrazineDaemon(port, url))
    return { url, logFrom }
  })
  const hzOut = (await readFile(hzLog)).subarray(logFrom).toString('utf8')
  const redis =
    /agents' redis-server listening on (rediss?):\/\/([0-9.]+):(\d+) \(password in ([^)\s]+)\)/.exec(
      hzOut,
    )
  if (!redis) throw new Error(`cannot find the agents' Redis's endpoint in ${hzLog}`)
  const password = (await readFile(redis[4] ?? '', 'utf8')).trim()
  const pkiDir = join(hzDir, 'pki')
  const tokenFile = join(hzDir, 'operator-token')
  const token = (await readFile(tokenFile, 'utf8')).trim()

  const api = async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
    const res = await fetchResending(`${url}${path}`, {
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

  const central = async (group: string): Promise<LabCentral> => {
    const answer = await api('GET', `/v1/resource-groups/${encodeURIComponent(group)}`)
    const status = (answer.body as { status?: { ovnCentral?: { nb?: string; sb?: string } } })
      ?.status
    const { nb, sb } = status?.ovnCentral ?? {}
    if (answer.status !== 200 || !nb || !sb)
      throw new Error(`group ${group} has no OVN central: ${JSON.stringify(answer.body)}`)
    return { group, nb, sb, dir: centralDir(hzDir, group) }
  }

  return {
    url,
    token,
    tokenFile,
    redisUrl: `${redis[1]}://default:${password}@${redis[2]}:${redis[3]}`,
    caFile: join(pkiDir, 'ca.crt'),
    redisClient: {
      certFile: join(pkiDir, 'agents-redis-client.crt'),
      keyFile: join(pkiDir, 'agents-redis-client.key'),
    },
    centralsDir: centralsRoot(hzDir),
    api,
    central,
  }
}

/**
 * Attempts in all: a burst of requests leaves as many kept-alive sockets, which the server
 * closes together; on a loaded machine the client's timers run late and the next requests
 * can meet several of them in a row.
 */
const RESENDS = 8

/** Socket errors of a connection that failed under the request, with no answer read. */
const CONNECTION_FAILED = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET'])

/**
 * `fetch`, sent again when the connection failed under it: a kept-alive socket the server
 * closed as the client reused it (Node's 5 s keep-alive against undici's) fails with
 * `fetch failed`, usually before the request reaches Hydrazine. Sending again is safe for
 * what the lab sends: PUTs and DELETEs are idempotent, and a DPU's credentials issued
 * twice leave the second set, the one read, in force. Any answer, error status included,
 * is returned as it is.
 */
async function fetchResending(input: string, init: RequestInit): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(input, init)
    } catch (err) {
      const cause = err instanceof Error ? (err.cause as { code?: unknown } | undefined) : undefined
      const code = typeof cause?.code === 'string' ? cause.code : ''
      if (attempt >= RESENDS || !CONNECTION_FAILED.has(code)) throw err
      // Each failed attempt drops one dead socket; after a burst the pool may hold several.
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt))
    }
  }
}

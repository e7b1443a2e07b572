import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import * as v from 'valibot'
import { ConfigError } from '../errors.ts'
import { isLoopback } from '../process/ports.ts'
import { AdminNetworkVariable, adminRelayIssue } from './admin-network.ts'
import { centralsFileError, ovsdbRemote, parseCentralsFile } from './centrals.ts'
import {
  checkClientTls,
  OvnClientTlsVariables,
  ovnClientFiles,
  ovnClientTlsConfig,
} from './client-tls.ts'
import { DnsZoneVariable } from './dns.ts'
import { invalid, pemFile, tlsFiles } from './files.ts'
import {
  checkDpuCa,
  checkNbClientTls,
  KubernetesVariables,
  kubernetesConfig,
} from './kubernetes.ts'
import { MetricsListenVariable, MetricsTokenVariable, metricsConfig } from './metrics.ts'
import { NetworkTypeVariables, networkTypeConfig } from './network-implementation.ts'
import { DebianMirrorVariable, OvnInstallVariable, ovnInstallConfig } from './ovn-install.ts'
import { QuotasVariable } from './quotas.ts'
import { AgentsRedisVariables, agentsRedisConfig, RedisUrlVariable } from './redis.ts'
import { type Config, LOG_LEVELS } from './types.ts'

export type { KubernetesCentralsConfig } from './kubernetes.ts'
export type { MetricsConfig } from './metrics.ts'
export type { BgpConfig, Config, FabricConfig, LogLevel } from './types.ts'

const port = v.pipe(
  v.string(),
  v.regex(/^\d+$/, 'must be a port number'),
  v.transform(Number),
  v.integer(),
  v.minValue(1, 'must be 1..65535'),
  v.maxValue(65535, 'must be 1..65535'),
)
const ipAddress = v.pipe(
  v.string(),
  v.check((s) => isIP(s) !== 0, 'must be an IP address'),
)
const asn = v.pipe(
  v.string(),
  v.regex(/^\d+$/, 'must be an AS number'),
  v.transform(Number),
  v.integer(),
  v.minValue(1, 'must be 1..4294967295'),
  v.maxValue(4294967295, 'must be 1..4294967295'),
)
const peers = v.pipe(
  v.string(),
  v.transform((s) =>
    s
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p.length > 0),
  ),
  v.array(
    v.pipe(
      v.string(),
      v.regex(/^(\[[0-9a-fA-F:.]+\]|[0-9.]+):\d+$/, 'each peer must be address:asn'),
      v.transform((p) => {
        const at = p.lastIndexOf(':')
        return {
          address: p.slice(0, at).replace(/^\[|\]$/g, ''),
          remoteAs: Number(p.slice(at + 1)),
        }
      }),
      v.check((p) => isIP(p.address) !== 0, 'peer address must be an IP address'),
      v.check((p) => p.remoteAs >= 1 && p.remoteAs <= 4294967295, 'peer AS must be 1..4294967295'),
    ),
  ),
)

const EnvSchema = v.object({
  REDIS_URL: RedisUrlVariable,
  REDIS_CA: v.optional(v.pipe(v.string(), v.minLength(1))),
  ...AgentsRedisVariables,
  HYDRAZINE_TLS_CERT: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_TLS_KEY: v.optional(v.pipe(v.string(), v.minLength(1))),
  OVN_NB_DB: v.optional(ovsdbRemote),
  OVN_SB_DB: v.optional(ovsdbRemote),
  HYDRAZINE_OVN_CENTRAL: v.optional(
    v.picklist(
      ['shared', 'per-group', 'external', 'kubernetes'],
      'must be shared, per-group, external or kubernetes',
    ),
  ),
  HYDRAZINE_OVN_CENTRALS_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),
  ...OvnClientTlsVariables,
  HYDRAZINE_OVN_INSTALL: OvnInstallVariable,
  HYDRAZINE_DEBIAN_MIRROR: DebianMirrorVariable,
  ...KubernetesVariables,
  HYDRAZINE_FRR_VTY_DIR: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_FRR_SAVE_CONFIG: v.optional(v.picklist(['true', 'false'], 'must be true or false')),
  HYDRAZINE_BGP_ASN: v.optional(asn, '65000'),
  HYDRAZINE_BGP_ROUTER_ID: v.optional(
    v.pipe(
      ipAddress,
      v.check((s) => isIP(s) === 4, 'must be an IPv4 address'),
    ),
    '127.0.0.1',
  ),
  HYDRAZINE_BGP_PEERS: v.optional(peers, ''),
  HYDRAZINE_HTTP_HOST: v.optional(ipAddress, '127.0.0.1'),
  HYDRAZINE_HTTP_PORT: v.optional(port, '8080'),
  HYDRAZINE_GRPC_PORT: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a port number (0 = off)'),
      v.transform(Number),
      v.maxValue(65535, 'must be 0..65535'),
    ),
    '8081',
  ),
  HYDRAZINE_DATA_DIR: v.optional(v.pipe(v.string(), v.minLength(1)), './.hydrazine'),
  HYDRAZINE_EMBEDDED_LISTEN: v.optional(ipAddress, '127.0.0.1'),
  HYDRAZINE_TOKENS_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_PRODUCERS_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_WEBHOOK_SECRET: v.optional(
    v.pipe(v.string(), v.minLength(32, 'must be at least 32 characters')),
  ),
  HYDRAZINE_FABRIC_DUMMY_IP: v.optional(
    v.pipe(
      v.string(),
      v.regex(
        /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/,
        'must be an IPv4 address with prefix, e.g. 172.18.0.254/24',
      ),
      v.check(
        (s) => isIP(s.split('/')[0] ?? '') === 4 && Number(s.split('/')[1]) <= 32,
        'must be an IPv4 address with prefix',
      ),
    ),
    '172.18.0.254/24',
  ),
  HYDRAZINE_FABRIC_GATEWAY: v.optional(
    v.pipe(
      ipAddress,
      v.check((s) => isIP(s) === 4, 'must be an IPv4 address'),
    ),
  ),
  HYDRAZINE_FABRIC_DUMMY_IP6: v.optional(
    v.pipe(
      v.string(),
      v.check((s) => {
        const [address = '', length = '', ...rest] = s.split('/')
        return (
          isIP(address) === 6 &&
          rest.length === 0 &&
          /^\d{1,3}$/.test(length) &&
          Number(length) <= 128
        )
      }, 'must be an IPv6 address with prefix, e.g. fd00:fab::fe/64'),
    ),
  ),
  HYDRAZINE_FABRIC_GATEWAY6: v.optional(
    v.pipe(
      ipAddress,
      v.check((s) => isIP(s) === 6, 'must be an IPv6 address'),
    ),
  ),
  HYDRAZINE_PHYSICAL_NETWORK: v.optional(
    v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a bridge-mapping name')),
    'physnet',
  ),
  ...NetworkTypeVariables,
  HYDRAZINE_DHCP_SERVERS: v.optional(
    v.pipe(
      v.string(),
      v.transform((s) =>
        s
          .split(',')
          .map((a) => a.trim())
          .filter((a) => a.length > 0),
      ),
      v.array(
        v.pipe(
          v.string(),
          v.check((s) => isIP(s) === 4, 'each DHCP server must be an IPv4 address'),
        ),
      ),
    ),
    '',
  ),
  HYDRAZINE_QUOTAS: QuotasVariable,
  HYDRAZINE_MAX_CENTRALS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a whole number of OVN centrals'),
      v.transform(Number),
      v.check((n) => n >= 1 && n <= 100_000, 'must be between 1 and 100000'),
    ),
  ),
  HYDRAZINE_CENTRALS_NORTHD_CPUS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+(\.\d+)?$/, 'must be a number of CPU cores, like 1 or 1.5'),
      v.transform(Number),
      v.check((n) => n > 0 && n <= 4096, 'must be more than 0 and at most 4096'),
    ),
  ),
  HYDRAZINE_CENTRAL_IDLE_MS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a whole number of milliseconds'),
      v.transform(Number),
      v.check((n) => n <= 86_400_000, 'must be at most 86400000 (a day)'),
    ),
  ),
  HYDRAZINE_ADMIN_NETWORK: AdminNetworkVariable,
  HYDRAZINE_DNS_ZONE: DnsZoneVariable,
  HYDRAZINE_GENEVE_IPSEC: v.optional(v.picklist(['true', 'false'], 'must be true or false')),
  HYDRAZINE_PARK_FOR_COMMIT: v.optional(v.picklist(['true', 'false'], 'must be true or false')),
  HYDRAZINE_METRICS_LISTEN: MetricsListenVariable,
  HYDRAZINE_METRICS_TOKEN: MetricsTokenVariable,
  LOG_LEVEL: v.optional(v.picklist(LOG_LEVELS, `must be one of ${LOG_LEVELS.join(', ')}`), 'info'),
  HYDRAZINE_DPU_HEALTH_MS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a number of milliseconds (0 = off)'),
      v.transform(Number),
      v.check((n) => n === 0 || n >= 100, 'must be 0 (off) or at least 100'),
    ),
    '2000',
  ),
  HYDRAZINE_CHASSIS_CERT_HOURS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a whole number of hours'),
      v.transform(Number),
      v.minValue(1, 'must be 1..720'),
      v.maxValue(720, 'must be 1..720'),
    ),
    '24',
  ),
  HYDRAZINE_JOB_LOCK_MS: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, 'must be a number of milliseconds'),
      v.transform(Number),
      v.minValue(1000, 'must be 1000..600000'),
      v.maxValue(600_000, 'must be 1000..600000'),
    ),
    '30000',
  ),
})

type EnvKey = keyof typeof EnvSchema.entries
const KEYS = Object.keys(EnvSchema.entries) as EnvKey[]

/**
 * Parses configuration; throws ConfigError naming every bad variable.
 *
 * @example
 * const config = loadConfig(process.env)
 * // HYDRAZINE_HTTP_PORT=abc → ConfigError: HYDRAZINE_HTTP_PORT: must be a port number
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const raw: Partial<Record<EnvKey, string>> = {}
  const file = env.HYDRAZINE_CONFIG
  if (file) Object.assign(raw, readConfigFile(file))
  for (const key of KEYS) {
    const value = env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }

  const parsed = v.safeParse(EnvSchema, raw)
  if (!parsed.success) {
    const issues = parsed.issues.map((issue) => ({
      path: v.getDotPath(issue)?.split('.')[0] ?? 'config',
      // A message never repeats the value: REDIS_URL carries a password.
      message: issue.message,
    }))
    throw new ConfigError(
      `invalid configuration: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      issues,
    )
  }
  const c = parsed.output
  if ((c.OVN_NB_DB === undefined) !== (c.OVN_SB_DB === undefined)) {
    const missing = c.OVN_NB_DB === undefined ? 'OVN_NB_DB' : 'OVN_SB_DB'
    invalid(missing, 'required when the other OVN database is set')
  }
  if (c.OVN_NB_DB !== undefined && c.HYDRAZINE_OVN_CENTRAL === 'per-group') {
    invalid(
      'HYDRAZINE_OVN_CENTRAL',
      'per-group centrals are embedded: not with an external OVN_NB_DB',
    )
  }
  const ovnCentral = c.HYDRAZINE_OVN_CENTRAL ?? defaultCentral(c)
  const ovnInstall = ovnInstallConfig(c.HYDRAZINE_OVN_INSTALL, c.HYDRAZINE_DEBIAN_MIRROR, {
    ok: c.OVN_NB_DB === undefined && (ovnCentral === 'shared' || ovnCentral === 'per-group'),
    why:
      c.OVN_NB_DB !== undefined
        ? 'OVN_NB_DB names an external central'
        : `HYDRAZINE_OVN_CENTRAL=${ovnCentral} runs none`,
  })
  if (!ovnInstall.ok) invalid(ovnInstall.path, ovnInstall.message)
  const externalRemotes =
    ovnCentral === 'external'
      ? checkExternalCentrals(c.OVN_NB_DB, c.HYDRAZINE_OVN_CENTRALS_FILE)
      : [c.OVN_NB_DB, c.OVN_SB_DB].filter((r) => r !== undefined)
  const ovnClient = ovnClientTlsConfig(
    c,
    externalRemotes,
    ovnCentral === 'external' || (ovnCentral === 'shared' && c.OVN_NB_DB !== undefined),
    ovnCentral === 'shared' ? 'an embedded shared central' : `HYDRAZINE_OVN_CENTRAL=${ovnCentral}`,
  )
  if (!ovnClient.ok) invalid(ovnClient.path, ovnClient.message)
  const ovnClientProblem = ovnClient.tls ? checkClientTls(ovnClient.tls, ovnClientFiles) : undefined
  if (ovnClientProblem) invalid(ovnClientProblem.path, ovnClientProblem.message)
  if (ovnCentral !== 'external' && c.HYDRAZINE_OVN_CENTRALS_FILE !== undefined) {
    invalid(
      'HYDRAZINE_OVN_CENTRALS_FILE',
      `names external centrals: only with HYDRAZINE_OVN_CENTRAL=external, not ${ovnCentral}`,
    )
  }
  const runsCentrals = ovnCentral === 'per-group' || ovnCentral === 'kubernetes'
  if (c.HYDRAZINE_MAX_CENTRALS !== undefined && !runsCentrals) {
    invalid(
      'HYDRAZINE_MAX_CENTRALS',
      `bounds the centrals Hydrazine runs, one per group: only with HYDRAZINE_OVN_CENTRAL=per-group or kubernetes, not ${ovnCentral}`,
    )
  }
  if (c.HYDRAZINE_CENTRALS_NORTHD_CPUS !== undefined && ovnCentral !== 'per-group') {
    invalid(
      'HYDRAZINE_CENTRALS_NORTHD_CPUS',
      `paces the embedded centrals that share this machine: only with HYDRAZINE_OVN_CENTRAL=per-group, not ${ovnCentral}`,
    )
  }
  if (c.HYDRAZINE_CENTRAL_IDLE_MS !== undefined && !runsCentrals) {
    invalid(
      'HYDRAZINE_CENTRAL_IDLE_MS',
      `is how long a group's own central outlives its last host: only with HYDRAZINE_OVN_CENTRAL=per-group or kubernetes, not ${ovnCentral}`,
    )
  }
  const kubernetes = kubernetesConfig(ovnCentral, c)
  if (!kubernetes.ok) invalid(kubernetes.path, kubernetes.message)
  const nbClientTls = kubernetes.kubernetes?.nbClientTls
  const nbClientProblem = nbClientTls ? checkNbClientTls(nbClientTls) : undefined
  if (nbClientProblem) invalid(nbClientProblem.path, nbClientProblem.message)
  const dpuCaFile = kubernetes.kubernetes?.dpuCaFile
  const dpuCaProblem = dpuCaFile ? checkDpuCa(dpuCaFile) : undefined
  if (dpuCaProblem) invalid(dpuCaProblem.path, dpuCaProblem.message)
  const tls = tlsFiles(c.HYDRAZINE_TLS_CERT, c.HYDRAZINE_TLS_KEY)
  if (!tls && !isLoopback(c.HYDRAZINE_HTTP_HOST)) {
    invalid(
      'HYDRAZINE_HTTP_HOST',
      `${c.HYDRAZINE_HTTP_HOST} is not loopback: serving the API there needs HYDRAZINE_TLS_CERT ` +
        'and HYDRAZINE_TLS_KEY (plaintext is only allowed on loopback)',
    )
  }
  if (c.HYDRAZINE_FABRIC_GATEWAY6 !== undefined && c.HYDRAZINE_FABRIC_DUMMY_IP6 === undefined) {
    invalid(
      'HYDRAZINE_FABRIC_GATEWAY6',
      'needs HYDRAZINE_FABRIC_DUMMY_IP6: without it IPv6 does not leave a group',
    )
  }
  const metrics = metricsConfig(c.HYDRAZINE_METRICS_LISTEN, c.HYDRAZINE_METRICS_TOKEN, !!tls)
  if (!metrics.ok) invalid(metrics.path, metrics.message)
  const admin = c.HYDRAZINE_ADMIN_NETWORK
  const relayed = adminRelayIssue(admin, c.HYDRAZINE_DHCP_SERVERS)
  if (relayed) invalid('HYDRAZINE_ADMIN_NETWORK', relayed)
  if (c.REDIS_CA !== undefined) {
    if (!c.REDIS_URL?.startsWith('rediss')) {
      invalid('REDIS_CA', 'needs a rediss:// (TLS) REDIS_URL')
    }
    pemFile('REDIS_CA', c.REDIS_CA, (pem) => new X509Certificate(pem), 'a PEM certificate')
  }
  const agents = agentsRedisConfig(c)
  if (!agents.ok) invalid(agents.path, agents.message)
  return {
    ...(c.REDIS_URL ? { redisUrl: c.REDIS_URL } : {}),
    ...(c.REDIS_CA ? { redisCaFile: resolve(c.REDIS_CA) } : {}),
    ...(agents.agentsRedis ? { agentsRedis: agents.agentsRedis } : {}),
    ...(tls ? { tls } : {}),
    ...(c.OVN_NB_DB && c.OVN_SB_DB ? { ovn: { nb: c.OVN_NB_DB, sb: c.OVN_SB_DB } } : {}),
    ...(ovnClient.tls ? { ovnClientTls: ovnClient.tls } : {}),
    ovnCentral,
    ovnInstall: ovnInstall.choice,
    ...(ovnCentral === 'external' && c.HYDRAZINE_OVN_CENTRALS_FILE
      ? { ovnCentralsFile: resolve(c.HYDRAZINE_OVN_CENTRALS_FILE) }
      : {}),
    ...(kubernetes.kubernetes ? { kubernetes: kubernetes.kubernetes } : {}),
    ...(c.HYDRAZINE_FRR_VTY_DIR ? { frrVtyDir: resolve(c.HYDRAZINE_FRR_VTY_DIR) } : {}),
    frrSaveConfig: c.HYDRAZINE_FRR_SAVE_CONFIG === 'true',
    bgp: {
      asn: c.HYDRAZINE_BGP_ASN,
      routerId: c.HYDRAZINE_BGP_ROUTER_ID,
      peers: c.HYDRAZINE_BGP_PEERS,
    },
    http: { host: c.HYDRAZINE_HTTP_HOST, port: c.HYDRAZINE_HTTP_PORT },
    grpcPort: c.HYDRAZINE_GRPC_PORT,
    dataDir: resolve(c.HYDRAZINE_DATA_DIR),
    embeddedListen: c.HYDRAZINE_EMBEDDED_LISTEN,
    ...(c.HYDRAZINE_TOKENS_FILE ? { tokensFile: resolve(c.HYDRAZINE_TOKENS_FILE) } : {}),
    ...(c.HYDRAZINE_PRODUCERS_FILE ? { producersFile: resolve(c.HYDRAZINE_PRODUCERS_FILE) } : {}),
    ...(c.HYDRAZINE_WEBHOOK_SECRET ? { webhookSecret: c.HYDRAZINE_WEBHOOK_SECRET } : {}),
    logLevel: c.LOG_LEVEL,
    dpuHealthEveryMs: c.HYDRAZINE_DPU_HEALTH_MS,
    dpuRedisMaxBytes: c.HYDRAZINE_DPU_REDIS_MAX_MB * 1024 * 1024,
    producerRedisMaxBytes: c.HYDRAZINE_PRODUCER_REDIS_MAX_MB * 1024 * 1024,
    jobLockMs: c.HYDRAZINE_JOB_LOCK_MS,
    chassisCertMs: c.HYDRAZINE_CHASSIS_CERT_HOURS * 60 * 60 * 1000,
    fabric: {
      dummyIp: c.HYDRAZINE_FABRIC_DUMMY_IP,
      ...(c.HYDRAZINE_FABRIC_GATEWAY ? { gateway: c.HYDRAZINE_FABRIC_GATEWAY } : {}),
      ...(c.HYDRAZINE_FABRIC_DUMMY_IP6 ? { dummyIp6: c.HYDRAZINE_FABRIC_DUMMY_IP6 } : {}),
      ...(c.HYDRAZINE_FABRIC_GATEWAY6 ? { gateway6: c.HYDRAZINE_FABRIC_GATEWAY6 } : {}),
      physicalNetwork: c.HYDRAZINE_PHYSICAL_NETWORK,
    },
    networkImplementation: networkTypeConfig(c),
    dhcpServers: c.HYDRAZINE_DHCP_SERVERS,
    quotas: c.HYDRAZINE_QUOTAS,
    ...(runsCentrals
      ? {
          maxCentrals: c.HYDRAZINE_MAX_CENTRALS ?? DEFAULT_MAX_CENTRALS,
          centralIdleMs: c.HYDRAZINE_CENTRAL_IDLE_MS ?? DEFAULT_CENTRAL_IDLE_MS,
        }
      : {}),
    ...(c.HYDRAZINE_CENTRALS_NORTHD_CPUS !== undefined
      ? { centralsNorthdCpus: c.HYDRAZINE_CENTRALS_NORTHD_CPUS }
      : {}),
    ...(admin ? { adminNetwork: admin } : {}),
    ...(c.HYDRAZINE_DNS_ZONE ? { dnsZone: c.HYDRAZINE_DNS_ZONE } : {}),
    geneveIpsec: c.HYDRAZINE_GENEVE_IPSEC === 'true',
    parkForCommit: c.HYDRAZINE_PARK_FOR_COMMIT !== 'false',
    ...(metrics.metrics ? { metrics: metrics.metrics } : {}),
  }
}

/**
 * How many OVN centrals — three processes, ~30 MB idle each; a group runs one while it has
 * hosts — a site may run at once unless `HYDRAZINE_MAX_CENTRALS` says otherwise.
 */
export const DEFAULT_MAX_CENTRALS = 200

/**
 * How long a group's own central outlives its last host unless `HYDRAZINE_CENTRAL_IDLE_MS`
 * says otherwise: a detach followed by an attach within it (a host re-imaged, moved to
 * another port) does not stop and start the central (about 150 ms and a full northd pass).
 */
export const DEFAULT_CENTRAL_IDLE_MS = 30_000

/** An external OVN_NB_DB is shared; a centrals file names external ones; else per group. */
function defaultCentral(c: {
  OVN_NB_DB?: string | undefined
  HYDRAZINE_OVN_CENTRALS_FILE?: string | undefined
}): Config['ovnCentral'] {
  if (c.OVN_NB_DB !== undefined) return 'shared'
  return c.HYDRAZINE_OVN_CENTRALS_FILE !== undefined ? 'external' : 'per-group'
}

/**
 * `external`: no OVN_NB_DB (that is one central every group shares), and a
 * `HYDRAZINE_OVN_CENTRALS_FILE` that is readable and valid now. Returns the remotes the
 * controller connects to (each central's NB and its controller SB remote).
 */
function checkExternalCentrals(nb: string | undefined, file: string | undefined): string[] {
  if (nb !== undefined) {
    invalid(
      'HYDRAZINE_OVN_CENTRAL',
      'external centrals are named per group in HYDRAZINE_OVN_CENTRALS_FILE: not with ' +
        'OVN_NB_DB / OVN_SB_DB (one central every group shares: HYDRAZINE_OVN_CENTRAL=shared)',
    )
  }
  if (file === undefined) {
    invalid(
      'HYDRAZINE_OVN_CENTRALS_FILE',
      "required with HYDRAZINE_OVN_CENTRAL=external: the JSON file naming each group's central",
    )
  }
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    throw prefixed(centralsFileError(file, [{ path: '', message: `cannot read: ${code}` }]))
  }
  try {
    return [...parseCentralsFile(text, file).values()].flatMap((c) => [c.nb, c.sbController])
  } catch (error) {
    throw error instanceof ConfigError ? prefixed(error) : error
  }
}

/** A centrals file's error as loadConfig reports it: every issue under the variable's name. */
const prefixed = (error: ConfigError) =>
  new ConfigError(
    `invalid configuration: ${error.message}`,
    error.issues.map((i) => ({
      path: 'HYDRAZINE_OVN_CENTRALS_FILE',
      message: i.path ? `${i.path}: ${i.message}` : i.message,
    })),
  )

function readConfigFile(path: string): Partial<Record<EnvKey, string>> {
  let data: unknown
  try {
    data = JSON.parse(readFileSync(path, 'utf8'))
  } catch (error) {
    // Not the parser's message: it quotes the file, and the file may hold REDIS_URL's password.
    const why =
      error instanceof SyntaxError ? 'not valid JSON' : (error as NodeJS.ErrnoException).code
    throw new ConfigError(`HYDRAZINE_CONFIG: cannot read ${path} as JSON: ${why ?? 'unreadable'}`, [
      { path: 'HYDRAZINE_CONFIG', message: 'unreadable or not JSON' },
    ])
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new ConfigError(`HYDRAZINE_CONFIG: ${path} must hold a JSON object`, [
      { path: 'HYDRAZINE_CONFIG', message: 'must hold a JSON object' },
    ])
  }
  const out: Partial<Record<EnvKey, string>> = {}
  for (const [key, value] of Object.entries(data)) {
    if (!(KEYS as string[]).includes(key)) {
      throw new ConfigError(`HYDRAZINE_CONFIG: unknown key ${key} in ${path}`, [
        { path: key, message: 'unknown key' },
      ])
    }
    out[key as EnvKey] = typeof value === 'string' ? value : JSON.stringify(value)
  }
  return out
}

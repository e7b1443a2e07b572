/**
 * The agent's configuration: command-line flags, each with an environment variable
 * fallback, parsed and validated once at start-up. A mistake is a `ConfigError` that
 * names the flag and the variable.
 *
 * What it guards: a DPU binds only the host ports its operator listed (`--host-ports`),
 * never its bridges or uplink; without the DPU's TLS identity (`--tls-*`) the gRPC
 * status is served on loopback only; the Redis password is never printed
 * (`describeConfig`, `redactingLog`).
 */
import { isIP, isIPv4 } from 'node:net'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import * as v from 'valibot'
import { DpuId, InterfaceName, PROTOCOL_VERSIONS } from '../lib/agent-protocol/index.ts'
import { ConfigError } from '../lib/errors.ts'

export interface AgentConfig {
  readonly dpuId: string
  /** OVN chassis name (`system-id`); defaults to the DPU id. */
  readonly systemId: string
  /** The DPU's fabric IPs; the first is the Geneve encap IP. */
  readonly fabricIps: readonly string[]
  /** OVSDB remote of the local Open_vSwitch database, e.g. `unix:/var/run/openvswitch/db.sock`. */
  readonly ovsDb: string
  /** OVS_RUNDIR of the local ovs-vswitchd. */
  readonly ovsRunDir: string
  /** `redis://` or `rediss://` (TLS), with `user:password@` where Redis has ACLs. */
  readonly redisUrl: string
  /** PEM file of the CA that signed Redis's certificate (a private CA), for `rediss://`. */
  readonly redisCa?: string
  /**
   * `host:port` for the gRPC server; port 0 picks a free one. A loopback address unless
   * the TLS identity is given (then clients must present a certificate from `tlsCa`).
   */
  readonly grpcListen: string
  /**
   * The DPU's TLS identity, PEM files, all three or none: a certificate whose CN is the
   * OVN chassis name (`systemId`), issued by Hydrazine's CA; its key; that CA. Used for
   * the gRPC server (mTLS), `ssl:` Southbound remotes (ovn-controller and the agent's own
   * checks) and Redis (client certificate).
   */
  readonly tlsCert?: string
  readonly tlsKey?: string
  readonly tlsCa?: string
  /** Pid, log and control files of the daemons the agent runs. */
  readonly runDir: string
  /** Network namespace the DPU's daemons run in (the lab); absent on real DPUs. */
  readonly netns?: string
  readonly datapathType: string
  readonly integrationBridge: string
  readonly uplinkBridge: string
  /** An interface to keep in the uplink bridge (created by the agent if missing). */
  readonly uplinkInterface?: string
  /** `ovn-bridge-mappings`, e.g. `physnet:br-phy`. */
  readonly bridgeMappings: string
  /**
   * Fabric addresses with prefix length (`100.64.0.150/24`) the DHCP relays of this DPU
   * may use upstream, one per group relayed here; without them relays have no uplink.
   */
  readonly relayUplinkIps: readonly string[]
  /**
   * The interfaces this DPU's hosts may be bound to (the host PF/VF representors on
   * BlueField, e.g. `pf0hpf`): a job naming any other port fails and touches nothing.
   * The operator's inventory lists the same ports. Never a bridge or the uplink.
   */
  readonly hostPorts: readonly string[]
  /** Host port when a job does not name one: one of `hostPorts` (default its first). */
  readonly defaultHostPort: string
  readonly heartbeatMs: number
  /** How long `configure` waits for ovn-controller to mark the port installed. */
  readonly installTimeoutMs: number
  /** BullMQ lock: a job whose agent died is picked up again after about this long. */
  readonly lockMs: number
  readonly protocolVersions: readonly string[]
  readonly queuePrefix?: string
}

interface Option {
  readonly key: keyof AgentConfig
  readonly flag: string
  readonly env: string
  readonly help: string
  readonly default?: string
}

/** Every option, its flag and its variable. */
export const OPTIONS: readonly Option[] = [
  { key: 'dpuId', flag: 'dpu-id', env: 'HZ_DPU_ID', help: 'this DPU id (required)' },
  {
    key: 'systemId',
    flag: 'system-id',
    env: 'HZ_SYSTEM_ID',
    help: 'OVN chassis name (default: the DPU id; the controller accepts acks only from that chassis)',
  },
  {
    key: 'fabricIps',
    flag: 'fabric-ips',
    env: 'HZ_FABRIC_IPS',
    help: 'comma-separated fabric IPs; the first is the encap IP (required)',
  },
  { key: 'ovsDb', flag: 'ovs-db', env: 'HZ_OVS_DB', help: 'local OVSDB remote (required)' },
  {
    key: 'ovsRunDir',
    flag: 'ovs-rundir',
    env: 'OVS_RUNDIR',
    help: 'OVS run directory',
    default: '/var/run/openvswitch',
  },
  {
    key: 'redisUrl',
    flag: 'redis-url',
    env: 'REDIS_URL',
    help: 'controller Redis (required)',
  },
  {
    key: 'redisCa',
    flag: 'redis-ca',
    env: 'HZ_REDIS_CA',
    help: 'CA certificate (PEM) of a rediss:// server with a private CA',
  },
  {
    key: 'grpcListen',
    flag: 'grpc-listen',
    env: 'HZ_AGENT_GRPC_LISTEN',
    help: 'gRPC host:port (not loopback: needs --tls-*)',
    default: '127.0.0.1:50151',
  },
  {
    key: 'tlsCert',
    flag: 'tls-cert',
    env: 'HZ_TLS_CERT',
    help: "this DPU's certificate (PEM), CN = system-id",
  },
  { key: 'tlsKey', flag: 'tls-key', env: 'HZ_TLS_KEY', help: 'its private key (PEM)' },
  {
    key: 'tlsCa',
    flag: 'tls-ca',
    env: 'HZ_TLS_CA',
    help: "Hydrazine's CA (PEM): gRPC clients, the SB",
  },
  {
    key: 'runDir',
    flag: 'run-dir',
    env: 'HZ_AGENT_RUN_DIR',
    help: 'files of ovn-controller and relays',
    default: '/var/run/hydrazine-agent',
  },
  { key: 'netns', flag: 'netns', env: 'HZ_AGENT_NETNS', help: 'netns for daemons (lab only)' },
  {
    key: 'datapathType',
    flag: 'datapath-type',
    env: 'HZ_DATAPATH_TYPE',
    help: 'OVS datapath type of the bridges (system, netdev)',
    default: 'system',
  },
  {
    key: 'integrationBridge',
    flag: 'integration-bridge',
    env: 'HZ_INTEGRATION_BRIDGE',
    help: 'integration bridge',
    default: 'br-int',
  },
  {
    key: 'uplinkBridge',
    flag: 'uplink-bridge',
    env: 'HZ_UPLINK_BRIDGE',
    help: 'transport/uplink bridge',
    default: 'br-phy',
  },
  {
    key: 'uplinkInterface',
    flag: 'uplink-interface',
    env: 'HZ_UPLINK_INTERFACE',
    help: 'interface kept in the uplink bridge',
  },
  {
    key: 'bridgeMappings',
    flag: 'bridge-mappings',
    env: 'HZ_BRIDGE_MAPPINGS',
    help: 'ovn-bridge-mappings (default physnet:<uplink bridge>)',
  },
  {
    key: 'relayUplinkIps',
    flag: 'relay-uplink-ips',
    env: 'HZ_RELAY_UPLINK_IPS',
    help: 'comma-separated fabric CIDRs for DHCP relay uplinks, one per relayed group',
  },
  {
    key: 'hostPorts',
    flag: 'host-ports',
    env: 'HZ_HOST_PORTS',
    help: 'comma-separated ports hosts may be bound to (required)',
  },
  {
    key: 'defaultHostPort',
    flag: 'host-port',
    env: 'HZ_HOST_PORT',
    help: 'host port when a job names none (default: first of --host-ports)',
  },
  {
    key: 'heartbeatMs',
    flag: 'heartbeat-ms',
    env: 'HZ_HEARTBEAT_MS',
    help: 'heartbeat interval',
    default: '5000',
  },
  {
    key: 'installTimeoutMs',
    flag: 'install-timeout-ms',
    env: 'HZ_INSTALL_TIMEOUT_MS',
    help: 'wait for ovn-installed',
    default: '30000',
  },
  {
    key: 'lockMs',
    flag: 'lock-ms',
    env: 'HZ_AGENT_LOCK_MS',
    help: 'BullMQ job lock duration',
    default: '30000',
  },
  {
    key: 'protocolVersions',
    flag: 'protocol-versions',
    env: 'HZ_PROTOCOL_VERSIONS',
    help: 'protocol versions spoken (testing skew)',
    default: PROTOCOL_VERSIONS.join(','),
  },
  {
    key: 'queuePrefix',
    flag: 'queue-prefix',
    env: 'HZ_QUEUE_PREFIX',
    help: 'BullMQ key prefix',
  },
]

const text = v.pipe(v.string(), v.minLength(1, 'must not be empty'))
const ms = v.pipe(
  v.string(),
  v.regex(/^\d+$/, 'must be a number of milliseconds'),
  v.transform(Number),
  v.minValue(50, 'must be at least 50'),
)
const list = <T extends v.GenericSchema<string, string>>(item: T, message: string) =>
  v.pipe(
    v.string(),
    v.transform((s) => s.split(',').map((x) => x.trim())),
    v.array(item, message),
    v.minLength(1, 'must not be empty'),
  )

const fields = {
  dpuId: DpuId,
  systemId: v.optional(DpuId),
  fabricIps: list(
    v.pipe(
      v.string(),
      v.check((s) => isIP(s) === 4, 'must be IPv4 addresses'),
    ),
    'must be IPv4 addresses',
  ),
  ovsDb: v.pipe(
    v.string(),
    v.regex(/^(unix:\/.+|tcp:[^:\s]+:\d{1,5})$/, 'must be unix:/path or tcp:HOST:PORT'),
  ),
  ovsRunDir: text,
  redisUrl: v.pipe(
    v.string(),
    v.regex(/^rediss?:\/\/.+/, 'must be a redis:// or rediss:// URL'),
    v.check(parsesAsUrl, 'must be a redis:// or rediss:// URL'),
  ),
  redisCa: v.optional(text),
  grpcListen: v.pipe(v.string(), v.regex(/^[^\s]+:\d{1,5}$/, 'must be host:port')),
  tlsCert: v.optional(text),
  tlsKey: v.optional(text),
  tlsCa: v.optional(text),
  runDir: text,
  netns: v.optional(text),
  datapathType: v.picklist(['system', 'netdev'], 'must be system or netdev'),
  integrationBridge: InterfaceName,
  uplinkBridge: InterfaceName,
  uplinkInterface: v.optional(InterfaceName),
  bridgeMappings: v.optional(v.pipe(v.string(), v.regex(/^[^:,]+:[^:,]+(,[^:,]+:[^:,]+)*$/))),
  relayUplinkIps: v.optional(
    list(
      v.pipe(
        v.string(),
        v.check((s) => {
          const [addr = '', len = '', ...rest] = s.split('/')
          return isIP(addr) === 4 && /^\d+$/.test(len) && Number(len) <= 32 && rest.length === 0
        }, 'must be IPv4 addresses with prefix length'),
      ),
      'must be IPv4 addresses with prefix length',
    ),
  ),
  hostPorts: list(InterfaceName, 'must be interface names'),
  defaultHostPort: v.optional(InterfaceName),
  heartbeatMs: ms,
  installTimeoutMs: ms,
  lockMs: ms,
  protocolVersions: list(v.pipe(v.string(), v.regex(/^\d+\.\d+$/)), "must be like '1.0,2.0'"),
  queuePrefix: v.optional(text),
}
const Schema = v.object(fields)

function parsesAsUrl(s: string): boolean {
  try {
    new URL(s)
    return true
  } catch {
    return false
  }
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '')
  return h === 'localhost' || h === '::1' || (isIPv4(h) && h.startsWith('127.'))
}

function optionOf(key: string): Option | undefined {
  return OPTIONS.find((o) => o.key === key)
}

function where(key: string): string {
  const o = optionOf(key)
  return o ? `--${o.flag} (or ${o.env})` : key || 'agent config'
}

/**
 * What the schema cannot say about one field: how the fields must agree. Each problem
 * names the option it is about.
 */
function crossCheck(c: v.InferOutput<typeof Schema>): { key: string; message: string }[] {
  const issues: { key: string; message: string }[] = []
  const never: [string | undefined, string][] = [
    [c.integrationBridge, 'the integration bridge'],
    [c.uplinkBridge, 'the uplink bridge'],
    [c.uplinkInterface, 'the uplink interface'],
  ]
  for (const [name, what] of never) {
    if (name && c.hostPorts.includes(name)) {
      issues.push({
        key: 'hostPorts',
        message: `must not list ${name}: ${what} is never a host port`,
      })
    }
  }
  for (const p of c.hostPorts) {
    // A relay port (`hzr` + 8 hex) or its uplink (the same and `u`).
    if (/^hzr[0-9a-f]{8}u?$/.test(p)) {
      issues.push({ key: 'hostPorts', message: `must not list ${p}: hzr… names are relay ports` })
    }
  }
  if (c.defaultHostPort && !c.hostPorts.includes(c.defaultHostPort)) {
    issues.push({
      key: 'defaultHostPort',
      message: `${c.defaultHostPort} is not one of --host-ports (${c.hostPorts.join(',')})`,
    })
  }
  const tls = [c.tlsCert, c.tlsKey, c.tlsCa]
  if (tls.some((x) => x !== undefined) && !tls.every((x) => x !== undefined)) {
    const missing = (['tlsCert', 'tlsKey', 'tlsCa'] as const).filter((k) => c[k] === undefined)
    for (const key of missing) {
      issues.push({
        key,
        message: 'is required with the other --tls-* options (all three or none)',
      })
    }
  }
  const host = c.grpcListen.slice(0, c.grpcListen.lastIndexOf(':'))
  if (c.tlsCert === undefined && !isLoopback(host)) {
    issues.push({
      key: 'grpcListen',
      message:
        `${c.grpcListen} is not a loopback address: without --tls-cert, --tls-key and ` +
        '--tls-ca anyone could read group names and the SB remote from it; ' +
        'give them or listen on 127.0.0.1',
    })
  }
  if (c.redisCa !== undefined && !c.redisUrl.startsWith('rediss://')) {
    issues.push({ key: 'redisCa', message: 'needs a rediss:// --redis-url (TLS)' })
  }
  return issues
}

/**
 * Parses flags (`--dpu-id X`) with environment fallbacks (`HZ_DPU_ID`).
 *
 * @example parseAgentConfig(['--dpu-id', 'dpu-1', '--ovs-db', 'unix:/run/db.sock'], env)
 */
export function parseAgentConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): AgentConfig {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...argv],
      options: Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: 'string' as const }])),
      strict: true,
      allowPositionals: false,
    }).values
  } catch (err) {
    throw new ConfigError(`agent: ${(err as Error).message}`)
  }
  const raw: Record<string, string> = {}
  for (const o of OPTIONS) {
    const value = values[o.flag] ?? env[o.env] ?? o.default
    if (typeof value === 'string') raw[o.key] = value
  }
  const result = v.safeParse(Schema, raw)
  const problems = result.success
    ? crossCheck(result.output)
    : result.issues.map((i) => {
        const key = v.getDotPath(i)?.split('.')[0] ?? ''
        return { key, message: raw[key] === undefined ? 'is required' : i.message }
      })
  if (!result.success || problems.length > 0) {
    const issues = problems.map((p) => ({ path: where(p.key), message: p.message }))
    throw new ConfigError(
      `agent configuration: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}`,
      issues,
    )
  }
  const c = result.output
  const hostPorts = [...new Set(c.hostPorts)]
  return {
    ...c,
    systemId: c.systemId ?? c.dpuId,
    runDir: resolve(c.runDir),
    bridgeMappings: c.bridgeMappings ?? `physnet:${c.uplinkBridge}`,
    relayUplinkIps: c.relayUplinkIps ?? [],
    hostPorts,
    defaultHostPort: c.defaultHostPort ?? hostPorts[0],
  } as AgentConfig
}

/**
 * `url` with its password replaced by `***`, for logs.
 *
 * @example redactUrl('rediss://agent:s3cret@10.0.0.1:6380') // 'rediss://agent:***@10.0.0.1:6380'
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString().replace(/\/$/, '')
  } catch {
    return '(an unparsable URL)'
  }
}

/** The secrets of a configuration, as they could appear in a log line. */
function secretsOf(config: Pick<AgentConfig, 'redisUrl'>): string[] {
  try {
    const raw = new URL(config.redisUrl).password
    if (!raw) return []
    return [...new Set([raw, decodeURIComponent(raw)])]
  } catch {
    return []
  }
}

/**
 * Wraps `log` so that no line it prints holds the Redis password, whatever error text
 * a library put in it. The configuration itself is printed with `describeConfig`.
 */
export function redactingLog(
  config: Pick<AgentConfig, 'redisUrl'>,
  log: (line: string) => void,
): (line: string) => void {
  const secrets = secretsOf(config)
  if (secrets.length === 0) return log
  return (line) => log(secrets.reduce((l, secret) => l.split(secret).join('***'), line))
}

/** One line for the start-up log: every option that is set, the Redis password hidden. */
export function describeConfig(config: AgentConfig): string {
  return OPTIONS.flatMap((o) => {
    const value = config[o.key]
    if (value === undefined) return []
    const text = Array.isArray(value) ? value.join(',') : String(value)
    return [`${o.flag}=${o.key === 'redisUrl' ? redactUrl(text) : text}`]
  }).join(' ')
}

export function usage(): string {
  return OPTIONS.map(
    (o) =>
      `  --${o.flag.padEnd(20)} ${o.env.padEnd(22)} ${o.help}${o.default ? ` [${o.default}]` : ''}`,
  ).join('\n')
}

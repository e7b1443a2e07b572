/**
 * The agent's configuration: command-line flags, each with an environment variable
 * fallback, parsed and validated once at start-up. A mistake is a `ConfigError` that
 * names the flag and the variable. The options themselves are listed in
 * `config-options.ts`.
 *
 * What it guards: a DPU binds only the host ports its operator listed (`--host-ports`),
 * never its bridges or uplink; without the DPU's TLS identity (`--tls-*`) the gRPC
 * status is served on loopback only; the Redis password is never printed
 * (`describeConfig`, `redactingLog` in `log-redaction.ts`).
 */
import { isIP, isIPv4 } from 'node:net'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import * as v from 'valibot'
import {
  AGENT_PROTOCOL_VERSIONS,
  DpuId,
  InterfaceName,
  PROTOCOL_VERSIONS,
} from '../lib/agent-protocol/index.ts'
import { ConfigError } from '../lib/errors.ts'
import { parseMetricsListen } from '../lib/metrics/listen.ts'
import { clusterNodes, isClusterUrl } from '../lib/redis/connection.ts'
import { type AgentConfig, OPTIONS, type Option } from './config-options.ts'
import { HostPortNotAllowed } from './errors.ts'

export { type AgentConfig, OPTIONS, usage } from './config-options.ts'
export { describeConfig, redactingLog, redactUrl } from './log-redaction.ts'

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
    v.regex(
      /^rediss?(\+cluster)?:\/\/.+/,
      'must be a redis://, rediss:// or redis+cluster://host:port,… URL',
    ),
    v.check(parsesAsUrl, 'must be a redis://, rediss:// or redis+cluster://host:port,… URL'),
  ),
  redisCa: v.optional(text),
  grpcListen: v.pipe(v.string(), v.regex(/^[^\s]+:\d{1,5}$/, 'must be host:port')),
  tlsCert: v.optional(text),
  tlsKey: v.optional(text),
  tlsCa: v.optional(text),
  tlsServerCert: v.optional(text),
  tlsReloadMs: ms,
  grpcClients: list(
    v.pipe(
      v.string(),
      v.regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
        'must be certificate CNs (letters, digits, ".", "_", "-")',
      ),
    ),
    'must be certificate CNs (letters, digits, ".", "_", "-")',
  ),
  runDir: text,
  netns: v.optional(text),
  datapathType: v.picklist(['system', 'netdev'], 'must be system or netdev'),
  ovnMonitorAll: v.picklist(['true', 'false'], 'must be true or false'),
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
  evpnPeers: v.optional(
    list(v.pipe(v.string(), v.check(isIPv4, 'must be IPv4 addresses')), 'must be IPv4 addresses'),
  ),
  vrfBackend: v.picklist(['kernel', 'netns'], 'must be kernel or netns'),
  vrfNetnsDir: v.optional(text),
  vtepIp: v.optional(v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address'))),
  metricsListen: v.optional(
    v.pipe(
      v.string(),
      v.check((s) => parseMetricsListen(s) !== undefined, 'must be host:port or off'),
    ),
  ),
  metricsToken: v.optional(v.pipe(v.string(), v.minLength(16, 'must be at least 16 characters'))),
}
const Schema = v.object(fields)

function parsesAsUrl(s: string): boolean {
  try {
    if (isClusterUrl(s)) clusterNodes(s)
    else new URL(s)
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
  if (c.tlsServerCert !== undefined && c.tlsCert === undefined) {
    issues.push({ key: 'tlsServerCert', message: 'needs --tls-cert, --tls-key and --tls-ca' })
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
  const dpuNames = new Set([c.dpuId, c.systemId ?? c.dpuId])
  for (const name of c.grpcClients) {
    if (dpuNames.has(name)) {
      issues.push({
        key: 'grpcClients',
        message: `must not list ${name}: that is this DPU's own certificate, not a client`,
      })
    }
  }
  if (c.redisCa !== undefined && !c.redisUrl.startsWith('rediss')) {
    issues.push({ key: 'redisCa', message: 'needs a rediss:// --redis-url (TLS)' })
  }
  issues.push(...metricsIssues(c))
  return issues
}

/** `--metrics-listen` off loopback: HTTPS with the DPU's identity, and a bearer token. */
function metricsIssues(c: v.InferOutput<typeof Schema>): { key: string; message: string }[] {
  const listen = c.metricsListen === undefined ? 'off' : parseMetricsListen(c.metricsListen)
  if (listen === undefined || listen === 'off' || isLoopback(listen.host)) return []
  const issues: { key: string; message: string }[] = []
  if (c.metricsToken === undefined) {
    issues.push({
      key: 'metricsToken',
      message: `is required: --metrics-listen ${c.metricsListen} is not loopback`,
    })
  }
  if (c.tlsCert === undefined) {
    issues.push({
      key: 'metricsListen',
      message:
        `${c.metricsListen} is not a loopback address: metrics there are served over HTTPS ` +
        'with the --tls-* identity; give it or listen on 127.0.0.1',
    })
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
  const evpnPeers = c.evpnPeers ?? []
  const runDir = resolve(c.runDir)
  return {
    ...c,
    evpnPeers,
    // Fabric jobs (3.x) only when the DPU has a fabric to announce them to.
    protocolVersions:
      evpnPeers.length > 0 && raw.protocolVersions === PROTOCOL_VERSIONS.join(',')
        ? [...AGENT_PROTOCOL_VERSIONS]
        : c.protocolVersions,
    vrfNetnsDir: resolve(c.vrfNetnsDir ?? join(runDir, 'vrfs')),
    vtepIp: c.vtepIp ?? c.fabricIps.find((ip) => isIPv4(ip)) ?? '',
    systemId: c.systemId ?? c.dpuId,
    runDir,
    bridgeMappings: c.bridgeMappings ?? `physnet:${c.uplinkBridge}`,
    relayUplinkIps: c.relayUplinkIps ?? [],
    hostPorts,
    defaultHostPort: c.defaultHostPort ?? hostPorts[0],
  } as AgentConfig
}

/** A job's host port (or the DPU's default), when it is one of the DPU's `--host-ports`. */
export function hostPortOf(
  config: Pick<AgentConfig, 'dpuId' | 'defaultHostPort' | 'hostPorts'>,
  host: { hostPort?: string | undefined },
): string {
  const port = host.hostPort ?? config.defaultHostPort
  if (!config.hostPorts.includes(port)) {
    throw new HostPortNotAllowed(config.dpuId, port, config.hostPorts)
  }
  return port
}

/**
 * One simulated DPU with a host, a private OVN central on the fabric, Redis, and the NB
 * logical switch the host's logical port lives in: what every agent test starts from.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { Queue, QueueEvents } from 'bullmq'
import { type AgentConfig, OPTIONS } from '../../agent/config.ts'
import {
  createDpu,
  createFabric,
  type Fabric,
  labPrefix,
  run,
  type SimDpu,
  type SimHost,
} from '../../infra/lab/dpu.ts'
import { startLocalStack } from '../../infra/local/stack.ts'
import type { LocalStack } from '../../infra/local/types.ts'
import { type AgentClient, createAgentClient } from '../../lib/agent-protocol/grpc.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  type ConfigureInput,
  type Heartbeat,
} from '../../lib/agent-protocol/index.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { createRedis, type RedisClient } from '../../lib/redis/connection.ts'
import { withRedisCluster } from '../helpers/redis-cluster.ts'
import type { Teardown } from '../helpers/stack.ts'

export interface AgentLab {
  readonly dataDir: string
  readonly prefix: string
  readonly fabric: Fabric
  readonly dpu: SimDpu
  readonly host: SimHost
  readonly stack: LocalStack
  readonly sbRemote: string
  readonly redisUrl: string
  readonly queuePrefix: string
  readonly queue: Queue
  readonly events: QueueEvents
  readonly redis: RedisClient
  readonly dpuId: string
  readonly input: ConfigureInput
  /** The agent's configuration, with the DPU's identity (the SB is `ssl:`). */
  config(extra?: Partial<AgentConfig>): AgentConfig
  /** The same without any TLS identity. */
  plainConfig(extra?: Partial<AgentConfig>): AgentConfig
  /** A gRPC client of the agent, presenting a certificate from Hydrazine's CA (mTLS). */
  agentClient(address: string): Promise<AgentClient>
  nbctl(...args: string[]): Promise<string>
  sbctl(...args: string[]): Promise<string>
  /** The chassis name the SB Port_Binding of `logicalPort` is bound to, or '' when unbound. */
  boundChassis(logicalPort: string): Promise<string>
  heartbeat(): Promise<Heartbeat | undefined>
}

/**
 * The command-line flags that give `agent/main.ts` this configuration (`omit`: options to
 * leave to the environment or the defaults).
 */
export function agentArgs(
  config: AgentConfig,
  omit: readonly (keyof AgentConfig)[] = [],
): string[] {
  return OPTIONS.flatMap((o) => {
    const value = config[o.key]
    if (value === undefined || omit.includes(o.key)) return []
    return [`--${o.flag}`, Array.isArray(value) ? value.join(',') : String(value)]
  })
}

/** What a DPU holds, as ovs-vsctl and ip show it: compare two to see whether a job touched it. */
export interface DpuState {
  /** Bridge → its ports. */
  readonly bridges: Readonly<Record<string, readonly string[]>>
  /** Interface → its type, MAC and external_ids (ovs-vsctl's JSON). */
  readonly interfaces: Readonly<Record<string, string>>
  /** The Open_vSwitch row's external_ids (system-id, ovn-remote, …). */
  readonly chassis: string
  /** The agent's notes (`agent/ovs.ts`): br-int's `hydrazine:` external_ids, key=value. */
  readonly notes: readonly string[]
  /** The DPU's relay namespaces. */
  readonly relayNamespaces: readonly string[]
}

/** Reads the DPU's bridges, ports, interfaces, chassis settings and relay namespaces. */
export async function dpuState(dpu: SimDpu): Promise<DpuState> {
  const lines = (text: string) =>
    text
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')
      .sort()
  const bridges: Record<string, readonly string[]> = {}
  for (const b of lines(await dpu.vsctl('list-br'))) {
    bridges[b] = lines(await dpu.vsctl('list-ports', b))
  }
  const interfaces: Record<string, string> = {}
  const table = JSON.parse(
    await dpu.vsctl('--format=json', '--columns=name,type,mac,external_ids', 'list', 'Interface'),
  ) as { data: [string, ...unknown[]][] }
  for (const [name, ...rest] of table.data) interfaces[name] = JSON.stringify(rest)
  const relayNamespaces = lines(await run('ip', ['netns', 'list']))
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(`${dpu.netns}-hzr`))
  const notes = bridges['br-int']
    ? lines(await dpu.vsctl('br-get-external-id', 'br-int')).filter((l) =>
        l.startsWith('hydrazine:'),
      )
    : []
  return {
    bridges,
    interfaces,
    chassis: (await dpu.vsctl('get', 'Open_vSwitch', '.', 'external_ids')).trim(),
    notes,
    relayNamespaces,
  }
}

/**
 * A private redis-server speaking TLS only, on a free loopback port: its server certificate
 * and key `server`, admitting only client certificates of `ca`, with the users of `acl`
 * (ACL file lines; `user default off` first), keeping nothing on disk. Files under `dir`;
 * stopped when the lab ends. Returns its port.
 */
export async function startTlsRedis(
  lab: { later(fn: () => Promise<unknown>): void },
  dir: string,
  files: { readonly cert: string; readonly key: string; readonly ca: string },
  acl: string,
): Promise<number> {
  const aclFile = join(dir, 'users.acl')
  await writeFile(aclFile, `user default off\n${acl}\n`)
  const port = await freePort()
  const redis = await startDaemon({
    name: 'redis-server(tls)',
    command: 'redis-server',
    args: [
      ...['--port', '0', '--bind', '127.0.0.1', '--tls-port', String(port)],
      ...['--tls-cert-file', files.cert, '--tls-key-file', files.key],
      ...['--tls-ca-cert-file', files.ca, '--tls-auth-clients', 'yes', '--aclfile', aclFile],
      ...['--save', '', '--appendonly', 'no', '--dir', dir],
    ],
    logFile: join(dir, 'redis.out'),
    ready: () => canConnect({ port }),
  })
  lab.later(() => redis.stop())
  return port
}

export const HOST_MAC = '0a:00:00:00:01:01'
export const RELAY_MAC = '0a:00:00:00:01:fe'

/**
 * Starts the lab. `later` runs cleanups last-in first-out once the test ends: register
 * the agent's stop there so that it stops before the DPU and the central it talks to.
 */
export async function startAgentLab(
  t: Teardown,
  options: {
    /** Queues and heartbeats on a private 3-master Redis Cluster, not the embedded Redis. */
    redisCluster?: boolean
  } = {},
): Promise<AgentLab & { later(fn: () => Promise<unknown>): void }> {
  const cleanups: (() => Promise<unknown>)[] = []
  const later = (fn: () => Promise<unknown>) => cleanups.push(fn)
  t.teardown(async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {})
  })
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-agent-'))
  later(() => rm(dataDir, { recursive: true, force: true }))
  const prefix = labPrefix()
  const fabric = await createFabric({ prefix })
  later(() => fabric.destroy())
  const dpu = await createDpu({ fabric, name: 'dpu1', dataDir })
  later(() => dpu.destroy())
  const host = await dpu.addHost({ name: 'h1', mac: HOST_MAC, ipCidr: '10.10.10.2/24' })
  // Stopped after everything that talks to it (`later` runs last-in first-out).
  const cluster = options.redisCluster
    ? await withRedisCluster({ teardown: (fn) => later(async () => fn()) })
    : undefined
  const stack = await startLocalStack({
    dataDir: join(dataDir, 'stack'),
    redis: !cluster,
    ovn: { listenAddress: fabric.gatewayIp },
    frr: false,
  })
  later(() => stack.stop())
  const ovn = stack.ovn
  const redisUrl = cluster?.url ?? stack.redis?.url
  if (!ovn || !redisUrl) throw new Error('stack without OVN or Redis')

  const nbctl = (...args: string[]) =>
    run('ovn-nbctl', [`--db=${ovn.nb.unix}`, '--timeout=10', ...args])
  const sbctl = (...args: string[]) =>
    run('ovn-sbctl', [`--db=${ovn.sb.unix}`, '--timeout=10', ...args])
  const group = 'tenant-a'
  const hostLp = `${group}-h1`
  const relayLp = `${group}-relay`
  await nbctl('ls-add', group)
  await nbctl('lsp-add', group, hostLp, '--', 'lsp-set-addresses', hostLp, `${HOST_MAC} 10.10.10.2`)
  await nbctl('lsp-add', group, relayLp, '--', 'lsp-set-addresses', relayLp, RELAY_MAC)
  await nbctl('--wait=sb', 'sync')

  const queuePrefix = `hz-test-${prefix}`
  const dpuId = `${prefix}-dpu1`
  // The SB listens on the fabric, so over TLS (pssl:, RBAC role ovn-controller): the DPU's
  // identity is a certificate from Hydrazine's CA named for its chassis, as its issued
  // credentials hold it; the agent hands it to ovn-controller.
  const issued = await stack.pki.issueIdentity({
    commonName: dpuId,
    dnsNames: [dpuId],
    ips: ['127.0.0.1'],
  })
  const identity = await stack.pki.writeIssued(dpuId, issued)
  const serverCert = join(stack.pki.dir, `${dpuId}-server.crt`)
  await writeFile(serverCert, issued.serverCert)
  const connection = createRedis({ url: redisUrl }, { maxRetriesPerRequest: null })
  const queue = new Queue(agentQueueName(dpuId), { connection, prefix: queuePrefix })
  const events = new QueueEvents(agentQueueName(dpuId), { connection, prefix: queuePrefix })
  const redis = createRedis({ url: redisUrl })
  later(async () => {
    await events.close()
    await queue.close()
    redis.disconnect()
    connection.disconnect()
  })
  await events.waitUntilReady()
  const relayUplink = `${fabric.allocateIp()}/${fabric.prefixLength}`

  const plainConfig = (extra: Partial<AgentConfig> = {}): AgentConfig => ({
    dpuId,
    systemId: dpuId,
    fabricIps: [dpu.encapIp],
    ovsDb: dpu.ovsDb,
    ovsRunDir: dpu.ovsRunDir,
    redisUrl,
    grpcListen: '127.0.0.1:0',
    grpcClients: ['hydrazine-controller'],
    runDir: join(dataDir, 'agent'),
    netns: dpu.netns,
    datapathType: 'netdev',
    ovnMonitorAll: 'true',
    integrationBridge: 'br-int',
    uplinkBridge: dpu.uplinkBridge,
    uplinkInterface: dpu.uplinkInterface,
    bridgeMappings: `physnet:${dpu.uplinkBridge}`,
    relayUplinkIps: [relayUplink],
    hostPorts: dpu.hostPorts,
    defaultHostPort: dpu.hostPorts[0] ?? 'pf0hpf',
    heartbeatMs: 1000,
    tlsReloadMs: 30_000,
    installTimeoutMs: 20_000,
    lockMs: 2000,
    protocolVersions: ['1.0', '2.0'],
    queuePrefix,
    ...extra,
  })

  return {
    later,
    dataDir,
    prefix,
    fabric,
    dpu,
    host,
    stack,
    sbRemote: ovn.sb.remote,
    redisUrl,
    queuePrefix,
    queue,
    events,
    redis,
    dpuId,
    input: {
      dpuId,
      specVersion: 1,
      group: {
        name: group,
        sbRemote: ovn.sb.remote,
        dhcpServer: fabric.gatewayIp,
        relay: { logicalPort: relayLp, mac: RELAY_MAC, ip: '10.10.10.254', prefixLength: 24 },
      },
      host: { name: 'h1', logicalPort: hostLp, mac: HOST_MAC, hostPort: host.hostPort },
    },
    config: (extra = {}) => ({
      ...plainConfig(),
      tlsCert: identity.certFile,
      tlsKey: identity.keyFile,
      tlsCa: identity.caFile,
      tlsServerCert: serverCert,
      ...extra,
    }),
    plainConfig,
    async agentClient(address) {
      const client = await stack.pki.issueClient({ commonName: 'hydrazine-controller' })
      return createAgentClient(
        address,
        grpc.credentials.createSsl(
          Buffer.from(stack.pki.caCert),
          Buffer.from(client.key),
          Buffer.from(client.cert),
          // The agent's certificate names its DPU; the test dials 127.0.0.1.
          { checkServerIdentity: () => undefined },
        ),
      )
    },
    nbctl,

    sbctl,
    async boundChassis(logicalPort) {
      const uuid = (
        await sbctl(
          '--bare',
          '--columns=chassis',
          'find',
          'Port_Binding',
          `logical_port=${logicalPort}`,
        )
      ).trim()
      if (!uuid) return ''
      return (await sbctl('--bare', '--columns=name', 'list', 'Chassis', uuid)).trim()
    },
    async heartbeat() {
      return new Heartbeats(redis).read(dpuId)
    },
  }
}

import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { Job } from 'bullmq'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import type { HydrazineClient } from '../../app/index.ts'
import { type PerGroupCentrals, startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { type Controller, startController } from '../../infra/controller.ts'
import type { ConfigureAck, IsolateAck } from '../../lib/agent-protocol/index.ts'
import type { NetworkImplementationConfig } from '../../lib/config/network-implementation.ts'
import type { Producer } from '../../lib/jobs/producers.ts'
import type { AdminNetwork } from '../../lib/model/admin-network.ts'
import { type OvnCentralProvider, sharedCentralProvider } from '../../lib/ovn/central.ts'
import { OWNER_KEY, TOPOLOGY_TABLES } from '../../lib/ovn/index.ts'
import { type CertificateAuthority, trustedBy } from '../../lib/pki/index.ts'
import { FakeChassis } from '../helpers/fake-chassis.ts'
import { eventually } from '../helpers/processes.ts'
import { type LocalRedisCluster, withRedisCluster } from '../helpers/redis-cluster.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'
import { startStandInAgent, type TestAgent } from './stand-in-agent.ts'

const run = promisify(execFile)

export interface Pipeline {
  readonly controller: Controller
  readonly client: HydrazineClient
  /** The shared central's NB and SB (with `perGroup`: none, see `centrals`). */
  readonly nb: string
  readonly sb: string
  /** With `perGroup`: the controller's per-group centrals. */
  readonly centrals?: PerGroupCentrals
  /** The stack's data dir (per-group centrals live under `<dataDir>/centrals/`). */
  readonly dataDir: string
  readonly redisUrl: string
  /**
   * The agents' Redis (DPU queues, heartbeats, DPU users): its own with `agentsRedis`,
   * else `redisUrl` (the controller's single-Redis shortcut).
   */
  readonly agentsRedisUrl: string
  /** With `redisCluster`: the private Redis Cluster the pipeline runs on. */
  readonly redisCluster?: LocalRedisCluster
  readonly prefix: string
  /** With `tls`: the stack's CA (DPU identities, the centrals' certificates). */
  readonly pki?: CertificateAuthority
  /** vty socket dir of the private FRR, when started with `frr: true`. */
  readonly frrVtyDir?: string
  /**
   * Starts an in-process agent for a DPU that answers its queue like the real one. With
   * `protocolVersions`, it heartbeats them as the real agent's runtime does and refuses a
   * job in a major it does not speak; without, it sends no heartbeat (an unknown agent).
   */
  agent(
    dpuId: string,
    options?: {
      protocolVersions?: string[]
      /** Connect as this Redis user (a DPU's issued credentials) instead of the admin. */
      redis?: { username: string; password: string }
      /** A lying agent: acks with this instead of its honest ack. */
      tamper?: (ack: ConfigureAck | IsolateAck) => object
      /** An agent whose ovn-controller never binds anything in the SB. */
      noSouthbound?: boolean
      /** An agent that refuses every `isolate` (fails it for good, saying why). */
      refuseIsolate?: boolean
      /** An agent that answers an `isolate` only once this settles (a slow unbind). */
      isolateAfter?: (job: Job) => Promise<void>
      /** The ovn-controller version it heartbeats (with `protocolVersions`). */
      ovnVersion?: string
    },
  ): Promise<TestAgent>
  /** Hydrazine-owned NB rows, as `table count` lines. */
  ownedRows(): Promise<string[]>
  /** Runs ovn-nbctl against the NB and returns its output. */
  nbctl(...args: string[]): Promise<string>
  /** A logical switch port as NB holds it, or undefined when NB has no port of that name. */
  switchPort(name: string): Promise<SwitchPort | undefined>
  /** The NAT rules of a logical router as `type external_ip logical_ip`, sorted. */
  natRules(router: string): Promise<string[]>
}

export interface SwitchPort {
  readonly addresses: string[]
  readonly portSecurity: string[]
}

export { startStandInAgent, type TestAgent }

/** The Redis URL with another user's credentials in place of the admin's. */
export function asUser(url: string, user: { username: string; password: string }): string {
  const userinfo = `${encodeURIComponent(user.username)}:${encodeURIComponent(user.password)}@`
  return url.replace(/^([a-z+]+:\/\/)([^@/]*@)?/, `$1${userinfo}`)
}

/** The IPv6 fabric of `startPipeline({ fabric6: true })`. */
export const FABRIC6 = { dummyIp6: 'fd00:fab::fe/64', gateway6: 'fd00:fab::1' } as const

/** The DHCP server the pipeline's operator allows groups to relay to. */
export const DHCP_SERVER = '192.0.2.53'

export async function startPipeline(
  t: Teardown,
  options: {
    frr?: boolean
    /** One OVN central per group (the embedded default) instead of one shared. */
    perGroup?: boolean
    /**
     * With `perGroup`: every group's SB over TLS (admitting only its own chassis), and DPU
     * credentials carry a certificate from the stack's CA.
     */
    tls?: boolean
    /**
     * With `perGroup`: each group's central starts with its first host and stops `idleMs`
     * after its last (`HYDRAZINE_CENTRAL_IDLE_MS`), at most `maxCentrals` at once. By
     * default as `npm start` runs them (30 s after the last host, no cap); `false` keeps
     * every group's central running from its create to its delete.
     */
    onDemand?: { idleMs: number; maxCentrals?: number } | false
    /** With `perGroup` and `tls`: how long chassis certificates last (default a day). */
    chassisCertMs?: number
    /**
     * With `tls`: the stack's CA stands for the operator's CA of the DPUs' identities
     * (`HYDRAZINE_K8S_DPU_CA`): identities the agents present in their heartbeats are
     * recorded when it issued them (`ControllerOptions.dpuIdentities`).
     */
    recordIdentities?: boolean
    /** The test's own central provider (the stack then runs no OVN central). */
    ovn?: OvnCentralProvider
    /** Called at each named step a handler reaches (`attach:allocated`, …). */
    checkpoint?: (point: string, object?: string) => void | Promise<void>
    /** The registry the controller registers its metrics on (none by default). */
    metrics?: Registry
    /** A private 3-master Redis Cluster instead of the embedded Redis. */
    redisCluster?: boolean
    /**
     * The agents' queues and heartbeats on a second private Redis, as `npm start` runs
     * them (default: on the store's Redis, the controller's shortcut for tests).
     */
    agentsRedis?: boolean
    /** Each DPU's bytes in the agents' Redis bounded (`ControllerOptions.dpuRedisBound`). */
    dpuRedisBound?: { limitBytes: number; everyMs?: number }
    /** The queue producers the controller knows (`ControllerOptions.producers`). */
    producers?: readonly Producer[]
    /** Each producer's bytes bounded (`ControllerOptions.producerRedisBound`). */
    producerRedisBound?: { limitBytes: number; everyMs?: number }
    /** The zone group DNS domains live in (`HYDRAZINE_DNS_ZONE`); default none: no DNS. */
    dnsZone?: string
    /** `HYDRAZINE_GENEVE_IPSEC`: the DPUs' Geneve tunnels are IPsec (default off). */
    geneveIpsec?: boolean
    /** An IPv6 fabric (`FABRIC6`): hosts' IPv6 leaves their group through NAT66. */
    fabric6?: boolean
    /** The controller's logger (default none). */
    logger?: Logger
    /** Jobs the controller's worker handles at once (default `WORKER_CONCURRENCY`). */
    concurrency?: number
    /** Attaches and detaches park while their group's commit waits (default on, as `npm start`). */
    parkForCommit?: boolean
    /** The provider's admin network (`HYDRAZINE_ADMIN_NETWORK`), synced every 200 ms. */
    adminNetwork?: AdminNetwork
    /** The default network implementation and the Fabric pools (default Overlay, defaults). */
    networkImplementation?: NetworkImplementationConfig
  } = {},
): Promise<Pipeline> {
  const perGroup = options.perGroup ?? false
  const onDemand =
    perGroup && options.onDemand !== false ? (options.onDemand ?? { idleMs: 30_000 }) : undefined
  const cluster = options.redisCluster ? await withRedisCluster(t) : undefined
  const stack = await withStack(t, {
    redis: !cluster,
    agentsRedis: options.agentsRedis ?? false,
    ovn: !perGroup && !options.ovn,
    frr: options.frr ?? false,
  })
  const redisUrl = cluster?.url ?? stack.redis?.url
  if (!redisUrl) throw new Error('stack without redis')
  const agentsRedisUrl = stack.agentsRedis?.url ?? redisUrl
  const prefix = 'hzt'
  let centrals: PerGroupCentrals | undefined
  let ovn: OvnCentralProvider
  if (options.ovn) {
    ovn = options.ovn
  } else if (stack.ovn) {
    ovn = sharedCentralProvider({
      nb: stack.ovn.nb.unix,
      sb: stack.ovn.sb.remote,
      sbController: stack.ovn.sb.unix,
    })
  } else {
    centrals = await startPerGroupCentrals({
      dataDir: stack.dataDir,
      listenAddress: '127.0.0.1',
      pki: stack.pki,
      log: () => {},
      ...(options.tls ? { tls: true } : {}),
      ...(options.chassisCertMs ? { chassisCertMs: options.chassisCertMs } : {}),
    })
    const started = centrals
    t.teardown(() => started.close())
    ovn = centrals
  }
  const controller = await startController({
    dhcpServers: [DHCP_SERVER],
    redisUrl,
    ...(stack.agentsRedis ? { agentsRedis: { url: stack.agentsRedis.url } } : {}),
    ovn,
    fabric: {
      dummyIp: '172.18.0.254/24',
      gateway: '172.18.0.1',
      physicalNetwork: 'physnet',
      ...(options.fabric6 ? FABRIC6 : {}),
    },
    reconcileEveryMs: 0,
    ...(onDemand ? { centralsOnDemand: { idleMs: onDemand.idleMs } } : {}),
    ...(onDemand?.maxCentrals !== undefined ? { maxCentrals: onDemand.maxCentrals } : {}),
    prefix,
    // Tests kill worker processes: take their jobs over quickly.
    lockDurationMs: 2000,
    ...(options.checkpoint ? { checkpoint: options.checkpoint } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.dpuRedisBound ? { dpuRedisBound: options.dpuRedisBound } : {}),
    ...(options.producers ? { producers: options.producers } : {}),
    ...(options.producerRedisBound ? { producerRedisBound: options.producerRedisBound } : {}),
    ...(options.dnsZone ? { dnsZone: options.dnsZone } : {}),
    ...(options.geneveIpsec ? { geneveIpsec: true } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.parkForCommit === false ? { parkForCommit: false } : {}),
    ...(options.adminNetwork ? { adminNetwork: options.adminNetwork, adminSyncEveryMs: 200 } : {}),
    ...(options.networkImplementation
      ? { networkImplementation: options.networkImplementation }
      : {}),
    ...(options.tls
      ? {
          ...(options.recordIdentities ? { dpuIdentities: trustedBy(stack.pki.caCert) } : {}),
          certificates: async (dpuId: string) => ({
            ...(await stack.pki.issueIdentity({ commonName: dpuId, dnsNames: [dpuId] })),
            ca: stack.pki.caCert,
          }),
        }
      : {}),
  })
  t.teardown(() => controller.close())
  const { client } = controller
  const nb = stack.ovn?.nb.unix ?? ''
  // The stand-in agents leave in the SB what ovn-controller would.
  // A per-group SB over TLS is written through its central's own socket.
  const chassis = new FakeChassis(async (remote) => {
    if (!remote.startsWith('ssl:') || !centrals) return remote
    return (await centrals.list()).find((c) => c.sb === remote)?.sbController ?? remote
  })
  t.teardown(() => chassis.close())

  return {
    controller,
    client,
    nb,
    sb: stack.ovn?.sb.remote ?? '',
    ...(centrals ? { centrals } : {}),
    dataDir: stack.dataDir,
    redisUrl,
    agentsRedisUrl,
    ...(cluster ? { redisCluster: cluster } : {}),
    prefix,
    ...(options.tls ? { pki: stack.pki } : {}),
    ...(stack.frr ? { frrVtyDir: stack.frr.vtyDir } : {}),
    async agent(
      dpuId,
      {
        protocolVersions,
        redis: credentials,
        tamper,
        noSouthbound,
        refuseIsolate,
        isolateAfter,
        ovnVersion,
      } = {},
    ) {
      return startStandInAgent(t, {
        redisUrl: credentials ? asUser(agentsRedisUrl, credentials) : agentsRedisUrl,
        prefix,
        dpuId,
        ...(protocolVersions ? { protocolVersions } : {}),
        ...(ovnVersion ? { ovnVersion } : {}),
        ...(tamper ? { tamper } : {}),
        ...(refuseIsolate ? { refuseIsolate } : {}),
        ...(isolateAfter ? { isolateAfter } : {}),
        ...(noSouthbound ? {} : { chassis }),
      })
    },
    async nbctl(...args) {
      return (await run('ovn-nbctl', [`--db=${nb}`, ...args])).stdout
    },
    async switchPort(name) {
      const [row] = await nbFind(
        nb,
        'Logical_Switch_Port',
        ['addresses', 'port_security'],
        [`name=${name}`],
      )
      return row
        ? { addresses: setOf(row[0]).map(String), portSecurity: setOf(row[1]).map(String) }
        : undefined
    },
    async natRules(router) {
      const [refs] = await nbFind(nb, 'Logical_Router', ['nat'], [`name=${router}`])
      const wanted = new Set(setOf(refs?.[0]).map((ref) => String(ref)))
      const rules = await nbFind(nb, 'NAT', ['_uuid', 'type', 'external_ip', 'logical_ip'], [])
      return rules
        .filter(([uuid]) => wanted.has(String(uuid)))
        .map(([, type, external, logical]) => `${type} ${external} ${logical}`)
        .sort()
    },
    async ownedRows() {
      const lines: string[] = []
      for (const table of TOPOLOGY_TABLES) {
        const { stdout } = await run('ovn-nbctl', [
          `--db=${nb}`,
          '--bare',
          '--columns=_uuid,external_ids',
          'find',
          table,
          `external_ids:${OWNER_KEY.replace(':', '\\:')}!=""`,
        ])
        const count = stdout.split('\n\n').filter((b) => b.trim()).length
        if (count > 0) lines.push(`${table} ${count}`)
      }
      return lines
    },
  }
}

/** Rows of `table` matching `conditions` (ovn-nbctl `find` syntax), the given columns each. */
async function nbFind(
  nb: string,
  table: string,
  columns: string[],
  conditions: string[],
): Promise<unknown[][]> {
  const { stdout } = await run('ovn-nbctl', [
    `--db=${nb}`,
    '--format=json',
    `--columns=${columns.join(',')}`,
    'find',
    table,
    ...conditions,
  ])
  return (JSON.parse(stdout) as { data: unknown[][] }).data.map((row) => row.map(atomOf))
}

/** An OVSDB JSON value without its `uuid` tag: `['uuid', x]` is `x`; sets stay tagged. */
function atomOf(value: unknown): unknown {
  if (Array.isArray(value) && value[0] === 'uuid') return value[1]
  if (Array.isArray(value) && value[0] === 'set')
    return ['set', (value[1] as unknown[]).map(atomOf)]
  return value
}

/** The members of an OVSDB JSON set (a single member is sent bare). */
function setOf(value: unknown): unknown[] {
  if (value === undefined) return []
  if (Array.isArray(value) && value[0] === 'set') return value[1] as unknown[]
  return [value]
}

/** Waits until `check` holds; fails the caller's assertion with the last value seen. */
export async function until<T>(
  read: () => Promise<T>,
  check: (value: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  let last: T = await read()
  await eventually(async () => {
    last = await read()
    return check(last)
  }, timeoutMs)
  return last
}

export { dpuFabricIps, groupSpec, hostSpec } from '../helpers/requests.ts'

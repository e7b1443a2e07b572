/**
 * The controller's composition root: the one place that constructs its clients — Redis
 * connections, the state store, IPAM, DPU heartbeats, the NB connection pool — and hands
 * them to the queue wiring (`queues/worker.ts`) and the application (`app/`).
 * `npm start` (`infra/service.ts`), the worker processes of the tests and the benchmarks
 * all build the controller here.
 */

import type { Queue, Worker } from 'bullmq'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import { createTracer, HydrazineClient } from '../app/index.ts'
import type { AgentDirectory, FabricSettings } from '../functions/internal/deps.ts'
import { reconfigureForGeneveIpsec } from '../functions/internal/geneve-ipsec.ts'
import type { CommitPace } from '../functions/internal/group-apply.ts'
import { createPlanner } from '../functions/plan.ts'
import { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  PROTOCOL_VERSIONS,
  pickProtocolVersion,
  speaksFabric,
  speaksFabricAccess,
} from '../lib/agent-protocol/index.ts'
import type { NetworkImplementationConfig } from '../lib/config/network-implementation.ts'
import { createIpam, type Ipam } from '../lib/ipam/index.ts'
import { FRR_QUEUE } from '../lib/jobs/frr.ts'
import { type Producer, producerQueueName } from '../lib/jobs/producers.ts'
import { queueJobs } from '../lib/jobs/redrive.ts'
import type { AdminNetwork } from '../lib/model/admin-network.ts'
import type { Quotas } from '../lib/model/quotas.ts'
import {
  createOvnTrace,
  groupsInNb,
  NbPool,
  type OvnCentralProvider,
  type OvsdbTlsOptions,
  SbPool,
  setGeneveIpsec,
  TraceFacts,
} from '../lib/ovn/index.ts'
import type { CertificateSigner } from '../lib/pki/index.ts'
import type { RedisClient } from '../lib/redis/connection.ts'
import { createRedis, duplicateClient, type RedisEndpoint } from '../lib/redis/connection.ts'
import { ChangeFeed } from '../lib/state/changes.ts'
import { StateStore } from '../lib/state/store.ts'
import { startWorkers } from '../queues/worker.ts'
import {
  type CredentialIssuerOptions,
  createCredentialIssuer,
  removeDpuUsers,
  revokeProducerUser,
} from './credentials.ts'
import { controllerCollectors, controllerInstruments } from './metrics/controller.ts'
import { sharedRead } from './metrics/shared-read.ts'

export interface ControllerOptions {
  /** Redis URL, credentials included (`redis://:PASSWORD@host:port`, `rediss://` for TLS). */
  readonly redisUrl: string
  /** PEM file of the CA that signed a `rediss://` server's certificate (a private CA). */
  readonly redisCaFile?: string
  /**
   * The agents' Redis: the DPUs' queues, heartbeats and Redis users, apart from the
   * control plane's store, so that what a DPU writes costs the store nothing. Absent: the
   * store's Redis holds them too (a shortcut for tests and development only: a DPU can
   * then fill the store; `npm start` always runs two).
   */
  readonly agentsRedis?: RedisEndpoint
  readonly ovn: OvnCentralProvider
  readonly fabric: FabricSettings
  /** The zone group DNS domains live in (`HYDRAZINE_DNS_ZONE`); absent: no group DNS. */
  readonly dnsZone?: string
  /**
   * `HYDRAZINE_GENEVE_IPSEC`: every central it connects to gets `NB_Global.ipsec` set to it
   * (unset: false), and every `configure` asks the DPU for IPsec on its tunnels.
   */
  readonly geneveIpsec?: boolean
  /** The DHCP servers a group may relay to (default none). */
  readonly dhcpServers?: readonly string[]
  /** Per-tenant limits on groups, hosts and public IPs (default `DEFAULT_QUOTAS`). */
  readonly quotas?: Quotas
  /**
   * How many OVN centrals the site may run at once, with `centralsOnDemand` (default no
   * limit): the first host of a group whose central does not run is refused past it.
   */
  readonly maxCentrals?: number
  /**
   * Each group's central starts with its first host and stops `idleMs` after its last one
   * left (`HYDRAZINE_CENTRAL_IDLE_MS`); only with a provider that can stop a central
   * (per-group, Kubernetes). Absent: every group's central runs from its creation on.
   */
  readonly centralsOnDemand?: { readonly idleMs: number }
  /**
   * The controller's certificate, key and the CA it trusts for `ssl:` NB remotes (the
   * Kubernetes centrals' with `HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET`): PEM file paths, read
   * again on every reconnect. Absent: an `ssl:` NB cannot be reached.
   */
  readonly nbTls?: OvsdbTlsOptions
  /**
   * The controller's certificate for `ssl:` SBs it follows (the operator's centrals:
   * `HYDRAZINE_OVN_CLIENT_*`; the Kubernetes centrals' controller port, with the NBs'
   * `HYDRAZINE_K8S_NB_CLIENT_*`). Absent: an `ssl:` controller SB remote cannot be reached.
   */
  readonly sbTls?: OvsdbTlsOptions
  /** The CIDRs every group's Southbound admits by address: no DPU's NAT address inside. */
  readonly southboundCidrs?: readonly string[]
  /** The provider's admin network (`HYDRAZINE_ADMIN_NETWORK`; default none). */
  readonly adminNetwork?: AdminNetwork
  /** How often `admin.sync` runs with an admin network, in ms (default 1000). */
  readonly adminSyncEveryMs?: number
  /**
   * A new group's default network implementation and the Fabric groups' VNI and VLAN
   * ranges (`HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION`, `HYDRAZINE_FABRIC_VNIS`,
   * `HYDRAZINE_FABRIC_VLANS`; default Overlay, `DEFAULT_FABRIC_RANGES`).
   */
  readonly networkImplementation?: NetworkImplementationConfig
  /** Jobs handled at once by this process (default `WORKER_CONCURRENCY`). */
  readonly concurrency?: number
  /** How a group's NB commits are paced by its ovn-northd (default `COMMIT_PACE`; benches). */
  readonly commitPace?: CommitPace
  /**
   * Attaches and detaches park while their group's commit waits (`HandlerDeps.parkForCommit`;
   * default true).
   */
  readonly parkForCommit?: boolean
  /** How often `reconcile` runs, in ms (default 30 s; 0 = never). */
  readonly reconcileEveryMs?: number
  /** How often `dpu.health` checks the DPUs' heartbeats, in ms (default 0 = never). */
  readonly dpuHealthEveryMs?: number
  /**
   * The most bytes one DPU may hold in the agents' Redis (its queue's keys and heartbeat),
   * measured by `dpu.health` every `everyMs` (default 30 s); over it, its credentials are
   * revoked. Absent: not measured.
   */
  readonly dpuRedisBound?: { readonly limitBytes: number; readonly everyMs?: number }
  /**
   * The queue producers (`HYDRAZINE_PRODUCERS_FILE`): their queues are among `queues()` (the
   * dashboard, the metrics). Their users and the workers on their queues are the front
   * door's (infra/service.ts `startProducers`).
   */
  readonly producers?: readonly Producer[]
  /**
   * The most bytes one queue producer may hold in the agents' Redis (its queue's keys),
   * measured by `dpu.health` every `everyMs` (default 30 s); over it, its Redis user is
   * deleted. Absent: not measured.
   */
  readonly producerRedisBound?: { readonly limitBytes: number; readonly everyMs?: number }
  /** BullMQ key prefix (default `bull`); tests use their own. */
  readonly prefix?: string
  readonly logger?: Logger
  /** How long a crashed worker's job stays locked before another takes it (default 30 s). */
  readonly lockDurationMs?: number
  /** Issues a DPU's certificate (CN = its id) when Hydrazine runs a PKI. */
  readonly certificates?: CredentialIssuerOptions['certificates']
  /**
   * The CA of the DPUs' identities: the identity an agent presents in its heartbeat is
   * recorded as its DPU's when this CA issued it for that DPU (`HandlerDeps.dpuIdentities`).
   */
  readonly dpuIdentities?: Pick<CertificateSigner, 'issued'>
  /**
   * Called at each named step of a handler, with the object it works on where it names it;
   * tests kill the process at one, benches time them.
   */
  readonly checkpoint?: (point: string, object?: string) => void | Promise<void>
  /**
   * The composition root's metrics registry: the controller registers its job, repair,
   * host-Ready and NB transaction metrics there, and the gauges read on each scrape
   * (queues, IPAM pools, DPU heartbeats). Absent: no metrics.
   */
  readonly metrics?: Registry
}

export interface Controller {
  /** What the API and other systems call: writes validated, stored and enqueued; reads. */
  readonly client: HydrazineClient
  readonly worker: Worker
  readonly queue: Queue
  readonly store: StateStore
  readonly ipam: Ipam
  readonly heartbeats: Heartbeats
  /** The controller's own Redis connection (not a BullMQ one): the store's Redis. */
  readonly redis: RedisClient
  /** The BullMQ key prefix of its queues, and of the queue producers' (`bull` unless a test's). */
  readonly prefix: string
  /** Its connection to the agents' Redis (the same as `redis` without `agentsRedis`). */
  readonly agentsRedis: RedisClient
  /**
   * A new BullMQ connection to the agents' Redis, where what other systems write lives:
   * the DPUs' queues and the queue producers' (`api/producers/`).
   */
  agentsConnection(): RedisClient
  /**
   * Every queue the controller feeds or takes requests from, as it is now: its own, FRR's,
   * the agent queue of each DPU in the inventory or ever heard from, and each queue
   * producer's (for the dashboard and the metrics).
   */
  queues(): Promise<Queue[]>
  close(): Promise<void>
}

/** A connection BullMQ can block on: no per-request retry limit. */
export function bullConnection(endpoint: RedisEndpoint): RedisClient {
  return createRedis(endpoint, { maxRetriesPerRequest: null })
}

/** What the controller knows of the DPUs' agents, read from their live heartbeats. */
export function agentDirectory(heartbeats: Heartbeats): AgentDirectory {
  return {
    async protocolFor(dpuId) {
      const beat = await heartbeats.read(dpuId)
      // Unknown agent: speak the oldest version every shipped agent understands.
      return beat ? pickProtocolVersion(beat.protocolVersions) : PROTOCOL_VERSIONS[0]
    },
    async speaksFabric(dpuId) {
      const beat = await heartbeats.read(dpuId)
      return beat ? speaksFabric(beat.protocolVersions) : undefined
    },
    async speaksFabricAccess(dpuId) {
      const beat = await heartbeats.read(dpuId)
      return beat ? speaksFabricAccess(beat.protocolVersions) : undefined
    },
    async ovnVersionOf(dpuId) {
      return (await heartbeats.read(dpuId))?.ovnVersion
    },
    async identityOf(dpuId) {
      return (await heartbeats.read(dpuId))?.identity
    },
  }
}

/** Builds the controller's clients, starts its workers and returns its client. */
export async function startController(options: ControllerOptions): Promise<Controller> {
  const endpoint: RedisEndpoint = {
    url: options.redisUrl,
    ...(options.redisCaFile ? { caFile: options.redisCaFile } : {}),
  }
  const redis = createRedis(endpoint, { maxRetriesPerRequest: 3 })
  redis.on('error', (error) => options.logger?.debug({ err: error }, 'redis connection error'))
  const agentsEndpoint = options.agentsRedis
  const agentsRedis = agentsEndpoint
    ? createRedis(agentsEndpoint, { maxRetriesPerRequest: 3 })
    : redis
  if (agentsRedis !== redis) {
    agentsRedis.on('error', (error) =>
      options.logger?.debug({ err: error }, "agents' redis connection error"),
    )
  }
  const store = new StateStore(redis)
  await store.quotas.countStoredHosts()
  const ipam = createIpam(
    redis,
    options.networkImplementation ? { fabric: options.networkImplementation.fabricRanges } : {},
  )
  const heartbeats = new Heartbeats(agentsRedis)
  const instruments = options.metrics ? controllerInstruments(options.metrics) : undefined
  const geneveIpsec = options.geneveIpsec ?? false
  // A central whose NB_Global.ipsec this start changed: its DPUs are configured again
  // (once the workers, whose queue that takes, exist: every NB connection opens after).
  let ipsecChanged: ((groups: string[]) => Promise<unknown>) | undefined
  const nb = new NbPool(
    {
      ...(instruments ? { onTransaction: instruments.onTransaction } : {}),
      ...(options.nbTls ? { tls: options.nbTls } : {}),
    },
    async (client) => {
      if (!(await setGeneveIpsec(client, geneveIpsec))) return
      await ipsecChanged?.(await groupsInNb(client))
    },
  )
  const southbound = new SbPool(options.sbTls ? { tls: options.sbTls } : {})
  const changes = new ChangeFeed(() => duplicateClient(redis), store.changeLog)
  changes.onError((error) => options.logger?.debug({ err: error }, 'change feed error'))

  const agents = agentDirectory(heartbeats)
  const credentials = createCredentialIssuer({
    redis: agentsRedis,
    ...(options.prefix ? { queuePrefix: options.prefix } : {}),
    ...(options.certificates ? { certificates: options.certificates } : {}),
  })
  // Users issued by an older version may name keys this one renamed (queue names, the
  // heartbeat key): their agents would be refused. Point them at today's keys.
  const dpuIds = (await store.dpus.list()).map((d) => d.name)
  const refreshed = await credentials.refreshKeys(dpuIds)
  if (refreshed.length > 0) {
    options.logger?.info({ dpus: refreshed }, "DPU users now reach this version's keys")
  }
  // Users an older version issued on the store's Redis would let those DPUs write it still.
  const removed = agentsRedis === redis ? [] : await removeDpuUsers(redis, dpuIds)
  if (removed.length > 0) {
    options.logger?.warn(
      { dpus: removed },
      "DPU users removed from the store's Redis: issue these DPUs' credentials again, for the agents' Redis",
    )
  }
  const workers = await startWorkers({
    connection: () => bullConnection(endpoint),
    ...(agentsEndpoint ? { agentConnection: () => bullConnection(agentsEndpoint) } : {}),
    deps: {
      store,
      ipam,
      ovn: options.ovn,
      nb,
      southbound,
      agents,
      fabric: options.fabric,
      ...(options.networkImplementation?.fabricAsn !== undefined
        ? { fabricAsn: options.networkImplementation.fabricAsn }
        : {}),
      ...(options.dnsZone ? { dnsZone: options.dnsZone } : {}),
      ...(geneveIpsec ? { geneveIpsec } : {}),
      ...(options.adminNetwork ? { admin: options.adminNetwork } : {}),
      ...(options.checkpoint ? { checkpoint: options.checkpoint } : {}),
      ...(options.centralsOnDemand ? { centralsOnDemand: options.centralsOnDemand } : {}),
      parkForCommit: options.parkForCommit ?? true,
      ...(options.dpuIdentities ? { dpuIdentities: options.dpuIdentities } : {}),
    },
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.commitPace ? { commitPace: options.commitPace } : {}),
    ...(options.reconcileEveryMs !== undefined
      ? { reconcileEveryMs: options.reconcileEveryMs }
      : {}),
    ...(options.dpuHealthEveryMs !== undefined
      ? { dpuHealthEveryMs: options.dpuHealthEveryMs }
      : {}),
    ...(options.adminSyncEveryMs !== undefined
      ? { adminSyncEveryMs: options.adminSyncEveryMs }
      : {}),
    ...(options.prefix !== undefined ? { prefix: options.prefix } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.lockDurationMs !== undefined ? { lockDurationMs: options.lockDurationMs } : {}),
    ...(instruments ? { observers: instruments.observers } : {}),
    ...(options.dpuRedisBound
      ? {
          dpuUsage: {
            limitBytes: options.dpuRedisBound.limitBytes,
            everyMs: options.dpuRedisBound.everyMs ?? 30_000,
            revoke: (dpuId: string) => credentials.revoke(dpuId),
          },
        }
      : {}),
    ...(options.producerRedisBound
      ? {
          producerUsage: {
            limitBytes: options.producerRedisBound.limitBytes,
            everyMs: options.producerRedisBound.everyMs ?? 30_000,
            revoke: (producer: string) => revokeProducerUser(agentsRedis, producer),
          },
        }
      : {}),
  })
  ipsecChanged = async (groups) => {
    const hosts = await reconfigureForGeneveIpsec(
      { store, jobs: queueJobs(workers.queue) },
      groups,
      geneveIpsec,
    )
    if (hosts.length > 0) {
      options.logger?.info(
        { groups, hosts, geneveIpsec },
        "a central's Geneve IPsec changed: its DPUs are configured again",
      )
    }
  }
  const client = new HydrazineClient({
    store,
    queue: workers.queue,
    ipam,
    heartbeats,
    changes,
    policy: {
      dhcpServers: options.dhcpServers ?? [],
      ...(options.quotas ? { quotas: options.quotas } : {}),
      ...(options.maxCentrals !== undefined ? { maxCentrals: options.maxCentrals } : {}),
      ...(options.southboundCidrs ? { southboundCidrs: options.southboundCidrs } : {}),
      ...(options.adminNetwork ? { adminNetwork: options.adminNetwork } : {}),
      fabric6: options.fabric.dummyIp6 !== undefined,
      ...(options.networkImplementation
        ? { defaultNetworkImplementation: options.networkImplementation.defaultType }
        : {}),
    },
    planner: createPlanner({
      store,
      ipam,
      ovn: options.ovn,
      nb,
      fabric: options.fabric,
      ...(options.networkImplementation?.fabricAsn !== undefined
        ? { fabricAsn: options.networkImplementation.fabricAsn }
        : {}),
      ...(options.dnsZone ? { dnsZone: options.dnsZone } : {}),
    }),
    // Reads a group's central over the same NB and SB connections the workers use.
    tracer: createTracer({
      store,
      ipam,
      ovn: options.ovn,
      facts: async (central) =>
        new TraceFacts({
          nb: (await nb.get(central.nb)).client,
          sb: await southbound.get(central.sbController),
        }),
      ovnTrace: createOvnTrace(options.sbTls ? { tls: options.sbTls } : {}),
    }),
    credentials,
  })

  /**
   * The DPUs' newest beats, read once for a scrape's gauges and its queue list (each read
   * scans Redis for the live beats).
   */
  const beats = sharedRead(() => heartbeats.list())
  /**
   * Every queue the controller feeds or takes requests from: its own, FRR's, the agent
   * queue of each DPU known, and each queue producer's (on the agents' Redis).
   */
  const producerQueues = (options.producers ?? []).map((p) => producerQueueName(p.id)).sort()
  const queues = async () => {
    const dpus = new Set((await store.dpus.list()).map((d) => d.name))
    for (const beat of await beats()) dpus.add(beat.dpuId)
    const others = [FRR_QUEUE, ...[...dpus].sort().map(agentQueueName), ...producerQueues]
    return [workers.queue, ...others.map((name) => workers.queueNamed(name))]
  }
  if (options.metrics) {
    controllerCollectors(options.metrics, {
      groupNames: async () => (await store.groups.list()).map((g) => g.name),
      networkMap: (network) => ipam.map(network),
      heldAddresses: (network) => ipam.allocatedCount(network),
      publicIps: () => ipam.listPublicIps(),
      heartbeats: beats,
      queues,
      onError: (what, error) => options.logger?.debug({ err: error, what }, 'metrics read failed'),
    })
  }

  return {
    client,
    worker: workers.worker,
    queue: workers.queue,
    store,
    ipam,
    heartbeats,
    redis,
    agentsRedis,
    agentsConnection: () => bullConnection(agentsEndpoint ?? endpoint),
    prefix: options.prefix ?? 'bull',
    queues,
    async close() {
      changes.close()
      await workers.close()
      await nb.close()
      await southbound.close()
      redis.disconnect()
      if (agentsRedis !== redis) agentsRedis.disconnect()
    },
  }
}

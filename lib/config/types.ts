/**
 * The shape of Hydrazine's process configuration (`loadConfig` in `./index.ts` parses
 * and validates it).
 */

import type { AdminNetwork } from '../model/admin-network.ts'
import type { Quotas } from '../model/quotas.ts'
import type { OvnInstallChoice } from '../ovn/install.ts'
import type { OvnClientTls } from './client-tls.ts'
import type { KubernetesCentralsConfig } from './kubernetes.ts'
import type { MetricsConfig } from './metrics.ts'
import type { NetworkImplementationConfig } from './network-implementation.ts'
import type { AgentsRedisConfig } from './redis.ts'

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/**
 * Hydrazine's process configuration, parsed once at start-up from the environment and,
 * optionally, a JSON file named by `HYDRAZINE_CONFIG` (keys are the variable names below;
 * the environment wins). A service that is not configured is started embedded.
 */
export interface Config {
  /** `REDIS_URL` (credentials in it: `redis://:PASSWORD@host:port`); absent = embedded Redis. */
  readonly redisUrl?: string
  /** `REDIS_CA`: PEM file of the CA that signed a `rediss://` server's certificate. */
  readonly redisCaFile?: string
  /**
   * `AGENTS_REDIS_URL` (with `AGENTS_REDIS_CA`, `AGENTS_REDIS_CERT`, `AGENTS_REDIS_KEY`): the
   * Redis of the DPU agents' queues and heartbeats; absent = an embedded one, always apart
   * from the store's.
   */
  readonly agentsRedis?: AgentsRedisConfig
  /** `OVN_NB_DB` / `OVN_SB_DB` (both or neither); absent = embedded OVN central(s). */
  readonly ovn?: { readonly nb: string; readonly sb: string }
  /**
   * `HYDRAZINE_OVN_CLIENT_CERT`, `_KEY`, `HYDRAZINE_OVN_CA` (`_TLS_VERIFY_HOSTNAME`): the
   * controller's client certificate for the `ssl:` NBs and SBs of centrals the operator
   * runs (`OVN_NB_DB`, `HYDRAZINE_OVN_CENTRALS_FILE`); see lib/config/client-tls.ts.
   */
  readonly ovnClientTls?: OvnClientTls
  /**
   * `HYDRAZINE_OVN_CENTRAL`: `per-group` (the default when embedded) runs one OVN central
   * (NB, SB, northd) per resource group; `shared` runs one for every group, and is the
   * only choice with an external central (`OVN_NB_DB`); `external` (the default with
   * `HYDRAZINE_OVN_CENTRALS_FILE`) runs none: the operator names each group's central in
   * `ovnCentralsFile`; `kubernetes` (never a default) creates each group's central as a
   * StatefulSet through the Kubernetes API, as `kubernetes` says.
   */
  readonly ovnCentral: 'shared' | 'per-group' | 'external' | 'kubernetes'
  /**
   * `HYDRAZINE_MAX_CENTRALS` (only with `per-group` or `kubernetes`; default
   * `DEFAULT_MAX_CENTRALS`): how many OVN centrals the site may run at once. A group runs
   * one from its first host until `centralIdleMs` after its last; an empty group holds
   * none. The first host of a group past it is refused (CENTRALS_EXHAUSTED, HTTP 503).
   */
  readonly maxCentrals?: number
  /**
   * `HYDRAZINE_CENTRALS_NORTHD_CPUS` (only with `per-group`; default half of the machine's
   * cores, at least 1): how many cores the embedded centrals' ovn-northd processes share;
   * the commits of several busy centrals are paced to ask for about that much together.
   */
  readonly centralsNorthdCpus?: number
  /**
   * `HYDRAZINE_CENTRAL_IDLE_MS` (only with `per-group` or `kubernetes`; default
   * `DEFAULT_CENTRAL_IDLE_MS`): how long a group's central keeps running after its last
   * host left; an attach within it keeps the central.
   */
  readonly centralIdleMs?: number
  /**
   * `HYDRAZINE_OVN_INSTALL` (default `system`) and `HYDRAZINE_DEBIAN_MIRROR`: the OVN the
   * embedded centrals run: the system's (Debian 12, OVN 23.03), `debian-13` (OVN 25.03
   * from a root made once under the data dir) or an install root (lib/config/ovn-install.ts).
   */
  readonly ovnInstall: OvnInstallChoice
  /**
   * `HYDRAZINE_OVN_CENTRALS_FILE` (only with `external`), absolute: JSON mapping a group's
   * name to its central's remotes, `{"tenant-a": {"nb": …, "sb": …, "sbController"?: …}}`,
   * checked at start-up and read again whenever it changes (lib/config/centrals.ts).
   */
  readonly ovnCentralsFile?: string
  /**
   * `HYDRAZINE_K8S_*` (only with `kubernetes`): the namespace, image, replicas, storage
   * and SB TLS Secret of each group's central, and who may reach it (the controller's and
   * the DPUs' CIDRs, in its NetworkPolicy; lib/config/kubernetes.ts).
   */
  readonly kubernetes?: KubernetesCentralsConfig
  /** `HYDRAZINE_FRR_VTY_DIR`: vty socket directory of an external FRR; absent = embedded. */
  readonly frrVtyDir?: string
  /**
   * `HYDRAZINE_FRR_SAVE_CONFIG` (true/false, default false): with an external FRR, ask
   * bgpd to save its configuration (`write file`, to bgpd's own config file) before a
   * change is acknowledged. The embedded FRR always does.
   */
  readonly frrSaveConfig: boolean
  readonly bgp: BgpConfig
  /**
   * `HYDRAZINE_HTTP_HOST` (default 127.0.0.1) and `HYDRAZINE_HTTP_PORT` (default 8080).
   * A host other than loopback requires `tls`.
   */
  readonly http: { readonly host: string; readonly port: number }
  /**
   * `HYDRAZINE_TLS_CERT` / `HYDRAZINE_TLS_KEY` (both or neither): PEM files of the HTTPS
   * and gRPC server certificate and its key, checked to match at start-up.
   */
  readonly tls?: { readonly certFile: string; readonly keyFile: string }
  /** `HYDRAZINE_GRPC_PORT` (default 8081) on the HTTP host; 0 turns the gRPC API off. */
  readonly grpcPort: number
  /** `HYDRAZINE_DATA_DIR` (default ./.hydrazine), absolute. */
  readonly dataDir: string
  /**
   * `HYDRAZINE_EMBEDDED_LISTEN` (default 127.0.0.1): the address embedded Redis and the
   * embedded OVN central's TCP remotes listen on; DPU agents must reach both.
   */
  readonly embeddedListen: string
  /** `HYDRAZINE_TOKENS_FILE`: API bearer tokens; absent = an operator token in the data dir. */
  readonly tokensFile?: string
  /**
   * `HYDRAZINE_PRODUCERS_FILE`: the queue producers, each with whom it acts as (a tenant or
   * the operator) and its Redis password's SHA-256; absent = no producer queue is consumed.
   */
  readonly producersFile?: string
  /** `HYDRAZINE_WEBHOOK_SECRET`: HMAC key for Carbide webhooks; absent = webhooks refused. */
  readonly webhookSecret?: string
  /** `LOG_LEVEL` (default info). */
  readonly logLevel: LogLevel
  /**
   * `HYDRAZINE_DPU_HEALTH_MS` (default 2000; 0 = off): how often the controller checks
   * the DPUs' heartbeats against their hosts (`dpu.health`).
   */
  readonly dpuHealthEveryMs: number
  /**
   * `HYDRAZINE_CHASSIS_CERT_HOURS` (default 24; 1..720), in ms: how long a DPU's chassis
   * certificate for its group's embedded SB is valid; reconcile renews it once less than
   * half is left.
   */
  readonly chassisCertMs: number
  /**
   * `HYDRAZINE_DPU_REDIS_MAX_MB` (default 64; 0 = off), in bytes: the most one DPU may hold
   * in the agents' Redis; `dpu.health` measures it every 30 s and revokes the credentials
   * of a DPU over it (`DpuHealthy=False CredentialsRevoked`).
   */
  readonly dpuRedisMaxBytes: number
  /**
   * `HYDRAZINE_PRODUCER_REDIS_MAX_MB` (default 64; 0 = off), in bytes: the most one queue
   * producer may hold in the agents' Redis (its queue's keys); `dpu.health` measures it
   * every 30 s and deletes the Redis user of a producer over it.
   */
  readonly producerRedisMaxBytes: number
  /**
   * `HYDRAZINE_JOB_LOCK_MS` (default 30000): how long a job stays locked to a controller
   * that stopped renewing it (it died) before another worker, or this controller after a
   * restart, takes it over. Shorter: faster recovery, more lock renewals.
   */
  readonly jobLockMs: number
  readonly fabric: FabricConfig
  /**
   * `HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION` (default Overlay), `HYDRAZINE_FABRIC_VNIS`
   * and `HYDRAZINE_FABRIC_VLANS`: a new group's default type and the Fabric groups' pools
   * (lib/config/network-implementation.ts).
   */
  readonly networkImplementation: NetworkImplementationConfig
  /**
   * `HYDRAZINE_DHCP_SERVERS`: comma-separated IPv4 addresses of the DHCP servers a group
   * may relay to (`dhcpServer`); empty = groups relay to none.
   */
  readonly dhcpServers: readonly string[]
  /**
   * `HYDRAZINE_QUOTAS` (JSON, lib/config/quotas.ts): per-tenant limits on resource groups,
   * hosts and public IPs, `{"default": {"groups", "hosts", "publicIps"}, "tenants":
   * {"<tenant>": {…}}}`; unset, 100 groups, 10,000 hosts and 1,000 public IPs per tenant.
   */
  readonly quotas: Quotas
  /**
   * `HYDRAZINE_ADMIN_NETWORK` (JSON, lib/config/admin-network.ts; unset: none): the group
   * Hydrazine creates and owns as the provider's admin network, `{"group", "network":
   * {"cidr", "gateway"}, "dhcpServer"?}`; every host port no tenant host holds sits on it.
   */
  readonly adminNetwork?: AdminNetwork
  /**
   * `HYDRAZINE_DNS_ZONE` (default `hydrazine.internal`; `off`: absent): the zone group DNS
   * domains live in, each host resolving as `<hostname>.<group>.<zone>` in its group only
   * (lib/config/dns.ts).
   */
  readonly dnsZone?: string
  /**
   * `HYDRAZINE_GENEVE_IPSEC` (true/false, default false): the Geneve tunnels between DPUs
   * are IPsec. Every central the controller connects to gets `NB_Global.ipsec` set to it
   * (lib/ovn/geneve-ipsec.ts), and every `configure` asks the DPU's agent to give OVS its
   * IPsec certificate (`group.geneveIpsec`); see docs/security.md.
   */
  readonly geneveIpsec: boolean
  /**
   * `HYDRAZINE_PARK_FOR_COMMIT` (true/false, default true): an attach or detach whose group
   * apply waits for the pace of its central's commits gives its worker slot back meanwhile
   * (`HandlerDeps.parkForCommit`).
   */
  readonly parkForCommit: boolean
  /**
   * `HYDRAZINE_METRICS_LISTEN` (default 127.0.0.1:9464; `off`: absent) and
   * `HYDRAZINE_METRICS_TOKEN`: the Prometheus listener (`GET /metrics`), apart from the
   * API. Off loopback it requires the token and `tls` (lib/config/metrics.ts).
   */
  readonly metrics?: MetricsConfig
}

/** Fabric facts for the per-DPU gateway routers: their reserved address and the next hops. */
export interface FabricConfig {
  /** `HYDRAZINE_FABRIC_DUMMY_IP` (default 172.18.0.254/24): reserved fabric address with prefix. */
  readonly dummyIp: string
  /** `HYDRAZINE_FABRIC_GATEWAY`: the fabric next hop for traffic leaving the DPUs. */
  readonly gateway?: string
  /**
   * `HYDRAZINE_FABRIC_DUMMY_IP6`: the reserved IPv6 fabric address with prefix, e.g.
   * `fd00:fab::fe/64`. Set, IPv6 leaves a group like IPv4 does: NAT66 on each DPU's
   * gateway router to the DPU's IPv6 NAT address, public /128s announced over BGP.
   * Unset, IPv6 stays inside its group.
   */
  readonly dummyIp6?: string
  /** `HYDRAZINE_FABRIC_GATEWAY6`: the fabric's IPv6 next hop for traffic leaving the DPUs. */
  readonly gateway6?: string
  /** `HYDRAZINE_PHYSICAL_NETWORK` (default physnet): the DPUs' bridge-mapping name. */
  readonly physicalNetwork: string
}

export interface BgpConfig {
  /** `HYDRAZINE_BGP_ASN` (default 65000). */
  readonly asn: number
  /** `HYDRAZINE_BGP_ROUTER_ID` (default 127.0.0.1). */
  readonly routerId: string
  /** `HYDRAZINE_BGP_PEERS`: comma-separated `address:asn`, IPv6 as `[addr]:asn`. */
  readonly peers: readonly { readonly address: string; readonly remoteAs: number }[]
}

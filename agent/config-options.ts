/**
 * Every option of the DPU agent: its flag, environment variable, help line and default,
 * and the `AgentConfig` they fill once parsed (`config.ts`). `--help` prints them.
 */
import { PROTOCOL_VERSIONS } from '../lib/agent-protocol/index.ts'
import { CONTROLLER_IDENTITY } from '../lib/model/labels.ts'

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
  /**
   * The DPU's server certificate for the same key (serverAuth), PEM file: what its gRPC
   * and metrics serve with. Default `tlsCert`, which only an identity issued before
   * identities became clients only (clientAuth) can stand in for.
   */
  readonly tlsServerCert?: string
  /**
   * How often the TLS files are read again: a renewed identity (a new certificate, a new
   * key) is taken while the agent runs — its heartbeat, gRPC, metrics, new Redis
   * connections and ovn-controller present it — once the files agree (certificate for the
   * key, issued by the CA, valid, this chassis); until then the one in use stays.
   */
  readonly tlsReloadMs: number
  /**
   * With the TLS identity: the CNs of the client certificates the gRPC server answers.
   * Every DPU holds a certificate from the same CA, so the CA alone would let one DPU
   * read another's bound ports and groups; only these names may call (default: the
   * controller's, `hydrazine-controller`).
   */
  readonly grpcClients: readonly string[]
  /** Pid, log and control files of the daemons the agent runs. */
  readonly runDir: string
  /** Network namespace the DPU's daemons run in (the lab); absent on real DPUs. */
  readonly netns?: string
  readonly datapathType: string
  /**
   * `ovn-monitor-all`: ovn-controller takes the whole SB of its group, not only the rows of
   * datapaths local to it. A group's SB holds that group only, which every chassis in it
   * needs anyway; with conditional monitoring, the first port of a group on a DPU could be
   * marked `ovn-installed` before the flows of its switch's and router's datapaths arrived
   * (OVN before 26.09), and Ready would come before the host's traffic.
   */
  readonly ovnMonitorAll: 'true' | 'false'
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
  /**
   * `host:port` of the Prometheus listener (`GET /metrics`); absent or `off`: none. Off
   * loopback it needs `metricsToken` and the TLS identity (it serves HTTPS).
   */
  readonly metricsListen?: string
  /** Scrapers must send `Authorization: Bearer <token>` (secret: give it by environment). */
  readonly metricsToken?: string
  /**
   * The fabric's EVPN route reflectors (or leaves) the DPU's own FRR peers with, iBGP in
   * the fabric's AS. Given, the agent takes Fabric groups' hosts (it advertises protocol
   * 3.0) and runs zebra + bgpd; absent, it takes Overlay hosts only.
   */
  readonly evpnPeers?: readonly string[]
  /** How a Fabric group's VRF is built: a kernel VRF device, or a network namespace (the lab). */
  readonly vrfBackend?: 'kernel' | 'netns'
  /**
   * The netns backend: the directory the VRF namespaces are bound into, the only ones the
   * DPU's zebra (`-n`) sees as its `/run/netns` (default `<run-dir>/vrfs`).
   */
  readonly vrfNetnsDir?: string
  /** The DPU's VTEP address: the next hop of its type-5 routes (default the first fabric IP). */
  readonly vtepIp?: string
}

export interface Option {
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
    help: 'controller Redis (required); a Redis Cluster as redis+cluster://host:port,host:port',
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
    key: 'tlsServerCert',
    flag: 'tls-server-cert',
    env: 'HZ_TLS_SERVER_CERT',
    help: 'its server certificate (PEM) for gRPC and metrics (default --tls-cert)',
  },
  {
    key: 'tlsReloadMs',
    flag: 'tls-reload-ms',
    env: 'HZ_TLS_RELOAD_MS',
    help: 'how often the --tls-* files are read again for a renewed identity',
    default: '30000',
  },
  {
    key: 'tlsCa',
    flag: 'tls-ca',
    env: 'HZ_TLS_CA',
    help: "Hydrazine's CA (PEM): gRPC clients, the SB",
  },
  {
    key: 'grpcClients',
    flag: 'grpc-clients',
    env: 'HZ_AGENT_GRPC_CLIENTS',
    help: 'comma-separated client certificate CNs gRPC answers (with --tls-*)',
    default: CONTROLLER_IDENTITY,
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
    key: 'ovnMonitorAll',
    flag: 'ovn-monitor-all',
    env: 'HZ_OVN_MONITOR_ALL',
    help: "ovn-controller monitors its group's whole SB (true, false)",
    default: 'true',
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
    key: 'evpnPeers',
    flag: 'evpn-peers',
    env: 'HZ_EVPN_PEERS',
    help: "comma-separated EVPN peers (the fabric's route reflectors); given, Fabric groups' hosts are taken",
  },
  {
    key: 'vrfBackend',
    flag: 'vrf-backend',
    env: 'HZ_VRF_BACKEND',
    help: "a Fabric group's VRF: kernel (a VRF device) or netns (a namespace, the lab)",
    default: 'kernel',
  },
  {
    key: 'vrfNetnsDir',
    flag: 'vrf-netns-dir',
    env: 'HZ_VRF_NETNS_DIR',
    help: 'netns backend: the directory zebra sees as /run/netns [<run-dir>/vrfs]',
  },
  {
    key: 'vtepIp',
    flag: 'vtep-ip',
    env: 'HZ_VTEP_IP',
    help: 'the VTEP address of the VRFs (default: the first fabric IP)',
  },
  {
    key: 'queuePrefix',
    flag: 'queue-prefix',
    env: 'HZ_QUEUE_PREFIX',
    help: 'BullMQ key prefix',
  },
  {
    key: 'metricsListen',
    flag: 'metrics-listen',
    env: 'HZ_AGENT_METRICS_LISTEN',
    help: 'Prometheus /metrics host:port, or off (not loopback: needs --tls-* and a token)',
  },
  {
    key: 'metricsToken',
    flag: 'metrics-token',
    env: 'HZ_AGENT_METRICS_TOKEN',
    help: 'bearer token /metrics requires (give it by environment: flags show in ps)',
  },
]

/** The `--help` text: one line per option. */
export function usage(): string {
  return OPTIONS.map(
    (o) =>
      `  --${o.flag.padEnd(20)} ${o.env.padEnd(22)} ${o.help}${o.default ? ` [${o.default}]` : ''}`,
  ).join('\n')
}

/**
 * lib/agent-protocol: the contract between the controller and the DPU agent.
 *
 * - Each DPU consumes its own BullMQ queue (`agentQueueName(dpuId)`); a job's return
 *   value is the agent's ack.
 * - Every payload carries `protocolVersion` ('MAJOR.MINOR'). An agent refuses a major it
 *   does not know; minors only add optional fields, which an older agent ignores.
 * - The controller keeps speaking every version it has shipped: it reads the versions the
 *   agent advertises in its heartbeat (`pickProtocolVersion`) and builds the payload for
 *   that version (`buildConfigurePayload`).
 *
 * Imported by the controller and by the agent; it imports only valibot and lib/.
 */
import { createHash } from 'node:crypto'
import { isIPv4 } from 'node:net'
import * as v from 'valibot'
import { HydrazineError } from '../errors.ts'
import { FabricConfigurePayload, FabricIsolatePayload, ObservedVrf } from './fabric.ts'
import {
  DpuId,
  InterfaceName,
  MAX_REPORTED_PORTS,
  mac,
  name,
  reported,
  reportedList,
  specVersion,
} from './fields.ts'

export * from './fabric.ts'
export { DpuId, InterfaceName, MAX_REPORTED_PORTS } from './fields.ts'

/**
 * The protocol versions of Overlay jobs this code has shipped, oldest first. The controller
 * picks one of these for an Overlay host (`pickProtocolVersion`).
 */
export const PROTOCOL_VERSIONS = ['1.0', '2.0'] as const
export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number]
/**
 * Every version an agent may speak: the Overlay ones and `3.0`/`3.1`, the Fabric jobs
 * (`./fabric.ts`; 3.1 adds a host's access level). An agent advertises them only when it
 * can build Fabric groups' VRFs.
 */
export const AGENT_PROTOCOL_VERSIONS = [...PROTOCOL_VERSIONS, '3.0', '3.1'] as const

export const AgentJobName = { configure: 'configure', isolate: 'isolate' } as const
export type AgentJobName = (typeof AgentJobName)[keyof typeof AgentJobName]

/**
 * How many hash tags the DPU agent queues are spread over (`lib/redis/slots.ts`): enough
 * for every master of a cluster to carry some, few enough that the controller blocks on
 * one XREAD per shard. Changing it renames every agent queue.
 */
export const AGENT_SHARDS = 16

/**
 * A DPU's queue: `{hz-agents-N}agent-<dpuId>`, N its shard. BullMQ queue names may not
 * contain ':'; DPU ids are checked by `DpuId`.
 *
 * @example
 * agentQueueName('dpu-1') // '{hz-agents-6}agent-dpu-1'
 */
export function agentQueueName(dpuId: string): string {
  const shard = createHash('sha1').update(dpuId).digest().readUInt32BE(0) % AGENT_SHARDS
  return `{hz-agents-${shard}}agent-${dpuId}`
}

/**
 * True for the name of a DPU's queue (`agentQueueName`): those live on the agents' Redis.
 *
 * @example isAgentQueueName(agentQueueName('dpu-1')) // true
 */
export function isAgentQueueName(name: string): boolean {
  return /^\{hz-agents-\d+\}agent-/.test(name)
}

/**
 * A job id that makes duplicates harmless: one job per (action, host, spec version,
 * attempt). A new attempt at the same spec version (a re-driven host, a repair) is a
 * new job, which the agent runs again.
 *
 * @example
 * agentJobId('configure', p) // 'agent-configure-dpu-1-host-a-v3'
 * agentJobId('configure', p, 2) // 'agent-configure-dpu-1-host-a-v3-a2'
 */
export function agentJobId(
  name: AgentJobName,
  payload: { dpuId: string; host: { name: string }; specVersion: number },
  attempt = 1,
): string {
  const host = payload.host.name.replace(/[^A-Za-z0-9._-]/g, '_')
  return `agent-${name}-${payload.dpuId}-${host}-v${payload.specVersion}${attempt > 1 ? `-a${attempt}` : ''}`
}

/**
 * The name of a group's DHCP relay port when the controller did not send one
 * (`group.relay.portName`, which older controllers lack): `hzr` + 8 hex digits of a
 * SHA-256 of the group name. Its name becomes the relay's circuit id and Linux interface
 * names are at most 15 characters; but 32 bits of a hash of a tenant-chosen name can be
 * collided on purpose, so the controller allocates unique names instead, and an agent
 * never takes over a relay port another group holds.
 *
 * @example relayPortName('tenant-a/net-1') // 'hzr' + 8 hex digits
 */
export function relayPortName(group: string): string {
  return `hzr${createHash('sha256').update(group).digest('hex').slice(0, 8)}`
}

// ---------------------------------------------------------------- schemas

const ipv4 = v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address'))
const ovsdbRemote = v.pipe(
  v.string(),
  v.regex(
    /^(unix:\/.+|(tcp|ssl):(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5})$/,
    'must be an OVSDB remote: unix:/path, tcp:HOST:PORT or ssl:HOST:PORT',
  ),
)
/**
 * A relay port name as the controller allocates them: `hzr` + 8 lower-case hex digits
 * (a unique relay id). A valid interface name, and the relay's circuit id.
 */
export const RelayPortName = v.pipe(
  v.string(),
  v.regex(/^hzr[0-9a-f]{8}$/, "must be 'hzr' and 8 lower-case hex digits"),
)
/** One PEM certificate, as OVS and Node read them. */
const certificatePem = v.pipe(
  v.string(),
  v.maxLength(16_384),
  v.regex(
    /^-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\r?\n?$/,
    'must be one PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)',
  ),
)
const protocolVersion = v.pipe(
  v.string(),
  v.maxLength(16),
  v.regex(/^\d+\.\d+$/, "must be 'MAJOR.MINOR', e.g. '1.0'"),
)

const GroupV1 = v.object({
  name,
  /** The group's OVN Southbound remote, e.g. `tcp:10.0.0.1:6642`. */
  sbRemote: ovsdbRemote,
  /**
   * The certificate the DPU presents to that SB (with its own key) when the SB admits
   * only its group's chassis: the DPU's key certified by the group's chassis CA. Absent:
   * the DPU's identity as it is. Added in 1.x/2.x as an optional field: an older agent
   * drops it, and the group's SB then refuses it (the port is never installed).
   */
  sbCertificate: v.optional(certificatePem),
  /**
   * The CA the DPU trusts for that SB, alone, when the SB's server certificate comes from
   * the group's own CA: another group's SB, or any other holder of a certificate from
   * Hydrazine's CA, cannot pose as it. Absent: the agent's `--tls-ca`. Added in 1.x/2.x as
   * an optional field: an older agent drops it (and trusts `--tls-ca`, which that SB's
   * certificate is not from).
   */
  sbCa: v.optional(certificatePem),
  /**
   * True: the Geneve tunnels of this group's chassis are IPsec (the controller's
   * `HYDRAZINE_GENEVE_IPSEC`; its central's `NB_Global.ipsec`). The agent gives OVS the
   * certificate, key and CA `ovs-monitor-ipsec` authenticates the DPU's tunnels with
   * (`Open_vSwitch` `other_config`), and acks `geneveIpsec`. Added in 1.x/2.x as an
   * optional field: an older agent drops it and does not ack it (its hosts stay
   * `Configuring`, `GeneveIpsecNotConfigured`).
   */
  geneveIpsec: v.optional(v.boolean()),
  /** The group's DHCP server; with `relay`, the agent runs a relay towards it. */
  dhcpServer: v.optional(ipv4),
  relay: v.optional(
    v.object({
      logicalPort: name,
      mac,
      /**
       * The relay's own address in the group's subnet (reserved by the controller per
       * DPU). isc dhcrelay ignores requests on an interface without an IPv4 address, and
       * sends this address to the server as the RFC 3527 link selection. Added in 1.x/2.x
       * as an optional field: an older agent drops it.
       */
      ip: v.optional(ipv4),
      prefixLength: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(32))),
      /**
       * The relay's port name (its circuit id), allocated by the controller and unique
       * on the site. Added in 1.x/2.x as an optional field: an older agent drops it and
       * an older controller does not send it; either way the agent falls back to
       * `relayPortName(group)`.
       */
      portName: v.optional(RelayPortName),
    }),
  ),
})

const HostV1 = v.object({
  name,
  logicalPort: name,
  mac,
  /** The DPU-side interface of the host (a representor; a veth end in the lab). */
  hostPort: v.optional(InterfaceName),
})

export const ConfigurePayloadV1 = v.object({
  protocolVersion,
  dpuId: DpuId,
  specVersion,
  group: GroupV1,
  host: HostV1,
})
export type ConfigurePayloadV1 = v.InferOutput<typeof ConfigurePayloadV1>

/** v2 adds `host.mtu` (the agent sets it on the host port). */
export const ConfigurePayloadV2 = v.object({
  ...ConfigurePayloadV1.entries,
  host: v.object({
    ...HostV1.entries,
    mtu: v.optional(v.pipe(v.number(), v.integer(), v.minValue(576), v.maxValue(9216))),
  }),
})
export type ConfigurePayloadV2 = v.InferOutput<typeof ConfigurePayloadV2>

export const IsolatePayloadV1 = v.object({
  protocolVersion,
  dpuId: DpuId,
  specVersion,
  group: v.object({
    name,
    /**
     * The DPU's current certificate for the group's SB and the CA it trusts for it, as a
     * `configure` carries them (`GroupV1`): sent while the DPU still serves the host, so
     * that an ovn-controller whose certificate the group's new chassis CA no longer takes
     * can reconnect and show the SB the port released. Added in 1.x/2.x as optional
     * fields: an older agent drops them (and waits with the certificate it has).
     */
    sbCertificate: v.optional(certificatePem),
    sbCa: v.optional(certificatePem),
  }),
  host: v.object({ name, logicalPort: name, hostPort: v.optional(InterfaceName) }),
})
export type IsolatePayloadV1 = v.InferOutput<typeof IsolatePayloadV1>
/** `isolate` did not change in v2. */
export const IsolatePayloadV2 = IsolatePayloadV1
export type IsolatePayloadV2 = IsolatePayloadV1

/** What the agent saw on its DPU: reported in acks, heartbeats and gRPC `GetStatus`. */
export const ObservedState = v.object({
  /** OVS `system-id`, the OVN chassis name. */
  chassis: reported,
  bridges: reportedList(reported, 64),
  ovnRemote: v.nullable(v.pipe(v.string(), v.maxLength(4096))),
  ovnController: v.object({ running: v.boolean(), connected: v.boolean() }),
  boundPorts: reportedList(
    v.object({
      port: reported,
      logicalPort: reported,
      group: reported,
      ovnInstalled: v.boolean(),
    }),
    MAX_REPORTED_PORTS,
  ),
  relays: reportedList(
    v.object({
      group: reported,
      port: reported,
      dhcpServer: reported,
      running: v.boolean(),
    }),
    MAX_REPORTED_PORTS,
  ),
  /**
   * The Fabric groups' VRFs on the DPU (`./fabric.ts`). Added with protocol 3.0: absent
   * from agents that take no Fabric jobs.
   */
  vrfs: v.optional(reportedList(ObservedVrf, MAX_REPORTED_PORTS)),
})
export type ObservedState = v.InferOutput<typeof ObservedState>

export const ConfigureAck = v.object({
  dpuId: reported,
  specVersion,
  protocolVersion: reported,
  hostPort: reported,
  relayPort: v.optional(reported),
  ovnInstalled: v.boolean(),
  /**
   * True when the job asked for IPsec (`group.geneveIpsec`) and OVS has the DPU's IPsec
   * certificate, key and CA. Absent from older agents.
   */
  geneveIpsec: v.optional(v.boolean()),
  chassis: reported,
  observed: ObservedState,
})
export type ConfigureAck = v.InferOutput<typeof ConfigureAck>

export const IsolateAck = v.object({
  dpuId: reported,
  specVersion,
  protocolVersion: reported,
  hostPort: reported,
  /** True once the host port is gone from `br-int` and no SB binding names this chassis. */
  unbound: v.boolean(),
  /** The group's relay port, when this isolate stopped the relay (no host needs it). */
  relayStopped: v.optional(reported),
  chassis: reported,
  observed: ObservedState,
})
export type IsolateAck = v.InferOutput<typeof IsolateAck>

/**
 * The heartbeat interval the controller reckons with, whatever an agent says: under
 * 100 ms is taken as 100 ms, over a minute as a minute (so a DPU that claims it beats
 * once in 30 years is Lost within two minutes of its last beat).
 */
export const HEARTBEAT_INTERVAL_BOUNDS_MS = { min: 100, max: 60_000 } as const

/** What an agent reports every interval (`Heartbeats` in `./heartbeats.ts` keeps them). */
/** The most characters of an identity a heartbeat carries (a P-256 one is about 700). */
export const MAX_IDENTITY_BYTES = 8 * 1024

export const Heartbeat = v.object({
  dpuId: DpuId,
  agentVersion: v.pipe(v.string(), v.maxLength(128)),
  protocolVersions: reportedList(protocolVersion, 16),
  fabricIps: reportedList(v.pipe(v.string(), v.maxLength(45)), 8),
  /** ISO time of the beat. */
  at: v.pipe(v.string(), v.maxLength(64)),
  intervalMs: v.pipe(
    v.number(),
    v.finite(),
    v.transform((ms) =>
      Math.min(HEARTBEAT_INTERVAL_BOUNDS_MS.max, Math.max(HEARTBEAT_INTERVAL_BOUNDS_MS.min, ms)),
    ),
  ),
  observed: ObservedState,
  /**
   * The version of the DPU's `ovn-controller` (`23.03.1`), read once when the agent starts;
   * absent from agents before this field, or when it cannot be read. A group whose
   * ovn-northd is newer refuses the DPU (`OvnControllerTooOld`).
   */
  ovnVersion: v.optional(v.pipe(v.string(), v.regex(/^\d+\.\d+(\.\d+)?$/, 'must be like 23.03.1'))),
  /**
   * The DPU's identity (`--tls-cert`, PEM, public); absent without `--tls-*` and from
   * agents before this field. The controller records it as the DPU's when it has none
   * (or an older one) and it is a certificate of the DPUs' CA naming that DPU
   * (`identity.ts`): where the operator's CA issues the DPUs' certificates, this is how
   * a group's own central learns which key to certify.
   */
  identity: v.optional(v.pipe(v.string(), v.maxLength(MAX_IDENTITY_BYTES))),
})
export type Heartbeat = v.InferOutput<typeof Heartbeat>

// ---------------------------------------------------------------- versions

/** The agent or controller was asked to speak a protocol version it does not know. */
export class UnsupportedProtocolVersion extends HydrazineError {
  constructor(
    readonly requested: string,
    readonly supported: readonly string[],
  ) {
    super(
      'AGENT_PROTOCOL_UNSUPPORTED',
      `protocol version ${requested} is not supported (supported: ${supported.join(', ') || 'none'})`,
    )
  }
}

/** A job payload does not match its schema; the job must fail without retries. */
export class InvalidAgentPayload extends HydrazineError {
  constructor(
    readonly job: string,
    readonly issues: readonly string[],
  ) {
    super('AGENT_PAYLOAD_INVALID', `${job} payload is invalid: ${issues.join('; ')}`)
  }
}

export function majorOf(version: string): number {
  return Number(version.split('.')[0])
}

/**
 * The highest version both sides speak: the controller calls it with the versions an
 * agent advertised in its heartbeat. Throws when there is none.
 *
 * @example pickProtocolVersion(['1.0']) // '1.0', even though '2.0' exists
 */
export function pickProtocolVersion(
  agentVersions: readonly string[],
  ours: readonly string[] = PROTOCOL_VERSIONS,
): ProtocolVersion {
  const agentMajors = new Set(agentVersions.map(majorOf))
  for (const version of [...ours].reverse()) {
    if (agentMajors.has(majorOf(version))) return version as ProtocolVersion
  }
  throw new UnsupportedProtocolVersion(agentVersions.join('|') || 'none', ours)
}

/** What the controller knows about one host on one DPU, whatever the version. */
export interface ConfigureInput {
  readonly dpuId: string
  readonly specVersion: number
  readonly group: ConfigurePayloadV1['group']
  readonly host: ConfigurePayloadV1['host'] & { readonly mtu?: number }
}

/** Builds (and validates) the `configure` payload of one protocol version. */
export function buildConfigurePayload(version: '1.0', input: ConfigureInput): ConfigurePayloadV1
export function buildConfigurePayload(version: '2.0', input: ConfigureInput): ConfigurePayloadV2
export function buildConfigurePayload(
  version: ProtocolVersion,
  input: ConfigureInput,
): ConfigurePayloadV1 | ConfigurePayloadV2
export function buildConfigurePayload(
  version: ProtocolVersion,
  input: ConfigureInput,
): ConfigurePayloadV1 | ConfigurePayloadV2 {
  if (version === '1.0') {
    const { mtu: _dropped, ...host } = input.host
    return v.parse(ConfigurePayloadV1, { ...input, host, protocolVersion: version })
  }
  return v.parse(ConfigurePayloadV2, { ...input, protocolVersion: version })
}

/** Builds (and validates) the `isolate` payload of one protocol version. */
export function buildIsolatePayload(
  version: ProtocolVersion,
  input: Omit<IsolatePayloadV1, 'protocolVersion'>,
): IsolatePayloadV1 {
  return v.parse(IsolatePayloadV1, { ...input, protocolVersion: version })
}

/** A payload as the agent handles it: the newest shape, optional fields maybe absent. */
export type ConfigureRequest = ConfigurePayloadV2
export type IsolateRequest = IsolatePayloadV2

/** A job as the agent handles it, whichever protocol it came in. */
export type AgentJob =
  | { name: 'configure'; payload: ConfigureRequest }
  | { name: 'isolate'; payload: IsolateRequest }
  | { name: 'fabric-configure'; payload: FabricConfigurePayload }
  | { name: 'fabric-isolate'; payload: FabricIsolatePayload }

/**
 * Validates a job's payload for an agent that speaks `supported`. Throws
 * `UnsupportedProtocolVersion` for a major the agent does not know and
 * `InvalidAgentPayload` for a payload that does not match that major's schema; neither
 * is worth retrying. Major 3 is a Fabric group's host (`./fabric.ts`).
 */
export function parseAgentJob(
  job: string,
  data: unknown,
  supported: readonly string[] = AGENT_PROTOCOL_VERSIONS,
): AgentJob {
  const requested =
    typeof data === 'object' && data !== null && 'protocolVersion' in data
      ? String(data.protocolVersion)
      : 'missing'
  const major = majorOf(requested)
  if (!supported.some((s) => majorOf(s) === major)) {
    throw new UnsupportedProtocolVersion(requested, supported)
  }
  const fabric = major === 3
  const schema =
    job === AgentJobName.configure
      ? fabric
        ? FabricConfigurePayload
        : major === 1
          ? ConfigurePayloadV1
          : ConfigurePayloadV2
      : job === AgentJobName.isolate
        ? fabric
          ? FabricIsolatePayload
          : IsolatePayloadV1
        : undefined
  if (!schema) throw new InvalidAgentPayload(job, [`unknown job name ${job}`])
  const result = v.safeParse(schema, data)
  if (!result.success) {
    throw new InvalidAgentPayload(
      job,
      result.issues.map((i) => `${v.getDotPath(i) ?? '(root)'}: ${i.message}`),
    )
  }
  if (job === AgentJobName.configure) {
    return fabric
      ? { name: 'fabric-configure', payload: result.output as FabricConfigurePayload }
      : { name: 'configure', payload: result.output as ConfigureRequest }
  }
  return fabric
    ? { name: 'fabric-isolate', payload: result.output as FabricIsolatePayload }
    : { name: 'isolate', payload: result.output as IsolateRequest }
}

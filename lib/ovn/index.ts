/**
 * lib/ovn: an OVSDB (RFC 7047) client, typed builders over the generated schemas, and
 * the compiler from a group's desired state to OVN Northbound rows.
 */

export type {
  CentralUnavailableReason,
  OvnCentralEndpoints,
  OvnCentralProvider,
} from './central.ts'
export {
  CentralUnavailableError,
  ChassisIdentityRefused,
  OvnControllerTooOld,
  sharedCentralProvider,
} from './central.ts'
export type { ClientEvent, OvsdbClientOptions, TransactionTiming } from './client.ts'
export { OvsdbClient } from './client.ts'
export type { OvsdbTlsOptions } from './connection.ts'
export type { ColumnArg, Mutations, Where, Writable } from './database.ts'
export { Database } from './database.ts'
export * from './errors.ts'
export { setGeneveIpsec } from './geneve-ipsec.ts'
export { JsonStreamSplitter } from './json-stream.ts'
export type { Monitor, Monitor2Handler, MonitorHandle, MonitorHandler } from './monitors.ts'
export type { RequestOptions } from './pending-requests.ts'
export type { NbConnection } from './pool.ts'
export { NbPool, RemotePool } from './pool.ts'
export type * from './protocol.ts'
export { parseRemote } from './remote.ts'
export type * from './schema/nb.generated.ts'
export { nbSchema } from './schema/nb.generated.ts'
export type * from './schema/sb.generated.ts'
export { sbSchema } from './schema/sb.generated.ts'
export type * from './schema/vswitch.generated.ts'
export { ovsSchema } from './schema/vswitch.generated.ts'
export type { DbSchema } from './schema-types.ts'
export { SbPool } from './southbound.ts'
export { claimStoreEpoch, type EpochCheck, STORE_EPOCH_KEY } from './store-epoch.ts'
export type { ActualRow, ActualRows, ApplyOptions, ApplyResult } from './topology/apply.ts'
export {
  applyDesiredRows,
  applyGroupTopology,
  deleteGroupTopology,
  diffTopology,
  groupsInNb,
  readOwnedRows,
} from './topology/apply.ts'
export { NbTopologyCache } from './topology/cache.ts'
export type {
  CompileChanges,
  CompileOptions,
  DesiredRow,
  DesiredRows,
  ParentRef,
  TopologyTable,
} from './topology/compile.ts'
export {
  CompileMemo,
  compileGroupTopology,
  REROUTE_POLICY_PRIORITY,
  TOPOLOGY_TABLES,
  transitAddresses,
} from './topology/compile.ts'
export type { TopologyDiff } from './topology/diff.ts'
export { dnsDomain, hostDnsRecords, reverseName } from './topology/dns.ts'
export * from './topology/errors.ts'
export * from './topology/names.ts'
export { emptyRows, planGroupRows, planTopology, type TopologyPlan } from './topology/plan.ts'
export {
  BASELINE_PRIORITY,
  type GroupPolicyRule,
  type PolicyStatus,
  policyRows,
  RULE_PRIORITY_TOP,
  type UnresolvedRule,
} from './topology/policies.ts'
export type { DhcpRelayPort, GroupMember, GroupTopologySpec, HostAccess } from './topology/spec.ts'
export { GroupTopologySpecSchema } from './topology/spec.ts'
export * from './trace/index.ts'
export { decodeValue, encodeValue, isUuid } from './values.ts'

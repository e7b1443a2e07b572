/**
 * Tracing a packet through a group's logical network with `ovn-trace`: the microflows
 * (`flow.ts`), the runner (`runner.ts`), the parser of its detailed output (`parse.ts`),
 * the verdict and hops in plain words (`explain.ts`), the NAT rule that applies
 * (`nat.ts`) and the read-only lookups of a central (`facts.ts`).
 */
export * from './errors.ts'
export {
  describeDatapath,
  describePort,
  type Explained,
  explain,
  type TraceVerdict,
} from './explain.ts'
export { type BoundPort, TraceFacts } from './facts.ts'
export {
  arpRequest,
  bindingAddresses,
  EPHEMERAL_PORT,
  InvalidMicroflow,
  microflow,
  onLink,
  type PacketSpec,
  TRACE_TTL,
  type TraceProtocol,
} from './flow.ts'
export { dnatTargetOf, type NatRule, snatSourceOf } from './nat.ts'
export * from './parse.ts'
export { createOvnTrace, type OvnTrace, type OvnTraceOptions } from './runner.ts'

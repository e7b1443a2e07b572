/**
 * What a trace answers (`HydrazineClient.trace`): the verdict with its details under its
 * own name, a sentence saying it, the hops in plain words, notes, and the ovn-trace runs
 * it took (their raw output on request). Pure.
 */
import { describeDatapath, describePort, type TraceVerdict } from '../lib/ovn/index.ts'

/** The traced packet's source: a host, or the fabric (inbound). */
export type TraceSource =
  | {
      readonly host: string
      readonly group: string
      readonly port: string
      readonly mac: string
      readonly ip: string
      readonly dpu: string
      /** The chassis the Southbound binds its port to; null: none yet. */
      readonly boundTo: string | null
    }
  | {
      readonly fabric: true
      /** The address the packet comes from (a stand-in for any fabric address). */
      readonly ip: string
      /** The DPU whose localnet port it enters by, and that port. */
      readonly dpu: string
      readonly port: string
    }

export interface TraceDestination {
  readonly ip: string
  /** The host `to` named, or the host the address belongs to (inbound). */
  readonly host?: string
  readonly group?: string
}

/** One ovn-trace run: where, which packet, and (with `raw`) what it printed. */
export interface TraceRun {
  /** The central's service name (`shared`, `central-…`). */
  readonly central: string
  readonly datapath: string
  readonly flow: string
  readonly raw?: string
}

type Verdicts = TraceVerdict['verdict']
type DetailOf<K extends Verdicts> = Omit<Extract<TraceVerdict, { verdict: K }>, 'verdict'>

/** The verdict, and its details under its own name: `{verdict: 'dropped', dropped: {…}}`. */
export type TraceOutcome = {
  [K in Verdicts]: { readonly verdict: K } & { readonly [P in K]: DetailOf<K> }
}[Verdicts]

export type TraceAnswer = TraceOutcome & {
  readonly summary: string
  readonly from: TraceSource
  readonly to: TraceDestination
  readonly hops: readonly string[]
  readonly notes: readonly string[]
  readonly traces: readonly TraceRun[]
}

/** The outcome of a verdict: `{verdict, [verdict]: details}`. */
export function outcomeOf(v: TraceVerdict): TraceOutcome {
  const { verdict, ...detail } = v
  return { verdict, [verdict]: detail } as TraceOutcome
}

/** One sentence saying where the packet from `who` ends up. */
export function summaryOf(who: string, to: string, v: TraceVerdict): string {
  switch (v.verdict) {
    case 'delivered':
      return v.host
        ? `${who} reaches host ${v.host} of group ${v.group} (port ${v.port})`
        : `${who} reaches port ${v.port} (${describePort(v.port)})`
    case 'answered':
      return `${who} to ${to} is answered by ${describeDatapath(v.router)}`
    case 'dropped':
      return `${who} to ${to} is dropped by ${describeDatapath(v.datapath)}${v.stage ? ` at stage ${v.stage}` : ''}: ${v.reason}`
    case 'leaves': {
      const as = v.source ? ` as ${v.source}` : ''
      const arp = v.arp
        ? `, once an ARP request for ${v.arp.target} (sent there first: its MAC is not known yet) is answered`
        : ''
      return `${who} to ${to} leaves for the fabric through ${describePort(v.port)}${as}${arp}`
    }
    case 'unresolved':
      return `${who} to ${to} is never sent: nothing on ${describeDatapath(v.datapath)} answers the ARP request for ${v.target}`
    case 'inconclusive':
      return `ovn-trace stops at ${describeDatapath(v.datapath)} stage ${v.stage} (${v.action}) and cannot tell where ${who} to ${to} goes`
  }
}

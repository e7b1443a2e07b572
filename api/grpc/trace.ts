/**
 * The Trace RPC's messages ⇄ the client's trace request and answer (`app/trace.ts`):
 * the same validation and verdicts as `GET /v1/trace`, the verdict's details flattened
 * into the typed `TraceResponse`.
 */

import { type TraceAnswer, ValidationError } from '../../app/index.ts'
import type { TraceRequest__Output } from '../../proto/gen/hydrazine/v1/TraceRequest.ts'
import type { TraceResponse } from '../../proto/gen/hydrazine/v1/TraceResponse.ts'
import type { TraceVerdict__Output } from '../../proto/gen/hydrazine/v1/TraceVerdict.ts'

const PROTOCOLS: Readonly<Record<string, string | undefined>> = {
  TRACE_PROTOCOL_UNSPECIFIED: undefined,
  TRACE_PROTOCOL_ICMP: 'icmp',
  TRACE_PROTOCOL_TCP: 'tcp',
  TRACE_PROTOCOL_UDP: 'udp',
}

/** The request as `GET /v1/trace` would take it (`port` 0: none). */
export function traceInput(r: TraceRequest__Output): Record<string, unknown> {
  const protocol = String(r.protocol)
  if (!(protocol in PROTOCOLS)) {
    throw new ValidationError([{ path: 'protocol', message: 'must be a TraceProtocol' }])
  }
  const proto = PROTOCOLS[protocol]
  return {
    from: r.from,
    to: r.to,
    ...(proto ? { proto } : {}),
    ...(r.port ? { port: r.port } : {}),
    ...(r.raw ? { raw: true } : {}),
  }
}

const text = (value: unknown) => (typeof value === 'string' ? value : '')

/** The answer as a `TraceResponse`: the verdict's details in their own fields. */
export function traceMessage(answer: TraceAnswer): TraceResponse {
  const detail =
    (answer as unknown as Record<string, Record<string, unknown> | undefined>)[answer.verdict] ?? {}
  const arp = detail.arp as { target?: unknown } | undefined
  return {
    verdict: `TRACE_VERDICT_${answer.verdict.toUpperCase()}` as TraceVerdict__Output,
    summary: answer.summary,
    hops: [...answer.hops],
    notes: [...answer.notes],
    port: text(detail.port),
    host: text(detail.host),
    group: text(detail.group),
    datapath: text(detail.datapath ?? detail.router),
    stage: text(detail.stage),
    reason: text(detail.reason),
    match: text(detail.match),
    action: text(detail.action),
    dpu: text(detail.dpu),
    source: text(detail.source),
    arpTarget: text(detail.target ?? arp?.target),
    runs: answer.traces.map((run) => ({
      central: run.central,
      datapath: run.datapath,
      flow: run.flow,
      raw: run.raw ?? '',
    })),
  }
}

/**
 * What one DPU may hold in the agents' Redis: its queue's keys and its heartbeat, which its
 * Redis user writes, are measured (`measureDpuUsage`) every so often by `dpu.health`, and
 * a DPU over its bound loses its credentials — its Redis user is deleted and its
 * connections closed — so that it cannot go on to fill the agents' Redis for every DPU.
 * Its hosts then show `DpuHealthy=False CredentialsRevoked` and the DPU an event, until the
 * operator issues its credentials again.
 */
import type { DpuHealthRecord, DpuHealthRecords } from '../../lib/state/dpu-health.ts'
import type { HandlerDeps } from './deps.ts'
import { recordDpuEvent } from './dpu-events.ts'
import { CREDENTIALS_REVOKED } from './dpu-observed.ts'

/** How `dpu.health` bounds each DPU's bytes in the agents' Redis. */
export interface DpuUsageBound {
  /** Bytes held per DPU id (`measureDpuUsage`). */
  measure(): Promise<ReadonlyMap<string, number>>
  /** Deletes the DPU's Redis user and closes its connections (`DpuCredentialIssuer.revoke`). */
  revoke(dpuId: string): Promise<void>
  /** The most bytes one DPU may hold there. */
  readonly limitBytes: number
  /** How often to measure, in ms (each `dpu.health` run at most once per this). */
  readonly everyMs: number
}

/** A DPU whose credentials one run revoked. */
export interface DpuRevoked {
  readonly dpu: string
  readonly bytes: number
}

/**
 * Revokes the credentials of every DPU over `bound.limitBytes` not revoked already, each
 * with an event and its record's `revoked`; returns them and the records as they are now.
 * One DPU whose revocation fails holds up no other: it is tried again on the next run.
 */
export async function revokeOverBound(
  deps: Pick<HandlerDeps, 'store'> & { readonly records: Pick<DpuHealthRecords, 'write'> },
  bound: DpuUsageBound,
  records: ReadonlyMap<string, DpuHealthRecord>,
  now: Date,
): Promise<{
  revoked: DpuRevoked[]
  records: Map<string, DpuHealthRecord>
  failed: { dpu: string; error: string }[]
}> {
  const after = new Map(records)
  const revoked: DpuRevoked[] = []
  const failed: { dpu: string; error: string }[] = []
  for (const [dpu, bytes] of await bound.measure()) {
    const before = after.get(dpu) ?? { strays: {} }
    if (bytes <= bound.limitBytes || before.revoked) continue
    try {
      await bound.revoke(dpu)
      const record: DpuHealthRecord = { ...before, revoked: { at: now.toISOString(), bytes } }
      await deps.records.write(dpu, record)
      after.set(dpu, record)
      await recordDpuEvent(deps.store, dpu, {
        type: 'Warning',
        reason: CREDENTIALS_REVOKED,
        message: `DPU ${dpu} holds ${bytes} bytes in the agents' Redis, over its bound of ${bound.limitBytes}: its credentials are revoked until they are issued again`,
      })
      revoked.push({ dpu, bytes })
    } catch (error) {
      failed.push({ dpu, error: `revoking its credentials failed: ${String(error)}` })
    }
  }
  return { revoked, records: after, failed }
}

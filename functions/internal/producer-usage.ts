/**
 * What one queue producer may hold in the agents' Redis: its queue's keys, which its Redis
 * user writes, are measured every so often by `dpu.health` (with the DPUs'), and a
 * producer over its bound loses its Redis user — deleted, its connections closed — so that
 * it cannot go on to fill the agents' Redis for every DPU and every other producer. Its
 * queue stays where it is; the user is made again at the controller's next start (the
 * producers file still naming it), and revoked again there while its keys exceed the bound.
 */

/** How `dpu.health` bounds each producer's bytes in the agents' Redis. */
export interface ProducerUsageBound {
  /** Bytes held per producer id (`measureProducerUsage`). */
  measure(): Promise<ReadonlyMap<string, number>>
  /**
   * Deletes the producer's Redis user and closes its connections; false when it had none
   * (revoked already, or not configured).
   */
  revoke(producer: string): Promise<boolean>
  /** The most bytes one producer may hold there. */
  readonly limitBytes: number
  /** How often to measure, in ms (each `dpu.health` run at most once per this). */
  readonly everyMs: number
}

/** A producer whose Redis user one run revoked. */
export interface ProducerRevoked {
  readonly producer: string
  readonly bytes: number
}

/**
 * Revokes the Redis user of every producer over `bound.limitBytes` that still has one;
 * returns them. One producer whose revocation fails holds up no other: it is tried again on
 * the next run.
 *
 * @example
 * const { revoked } = await revokeProducersOverBound(bound) // [{ producer: 'ci-a', bytes: 70123456 }]
 */
export async function revokeProducersOverBound(bound: ProducerUsageBound): Promise<{
  revoked: ProducerRevoked[]
  failed: { producer: string; error: string }[]
}> {
  const revoked: ProducerRevoked[] = []
  const failed: { producer: string; error: string }[] = []
  for (const [producer, bytes] of await bound.measure()) {
    if (bytes <= bound.limitBytes) continue
    try {
      if (await bound.revoke(producer)) revoked.push({ producer, bytes })
    } catch (error) {
      failed.push({ producer, error: `revoking its Redis user failed: ${String(error)}` })
    }
  }
  return { revoked, failed }
}

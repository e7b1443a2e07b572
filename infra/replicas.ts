/**
 * Several controller processes on one Redis. Every replica serves HTTP and gRPC and runs
 * the job workers (BullMQ hands each job to one of them; a job's scheduler makes one job
 * per tick however many replicas ask for it; a reconcile run waits for one still running).
 * What must run in one process at a time takes a lease in the store:
 *
 * - `frr-consumer`: the FRR consumer, on the lease holder only, moved to another replica
 *   within the lease's 10 s when its holder dies. Each replica has its own BGP speaker
 *   (an FRR sidecar, or embedded); only the holder's announces, the others stay silent;
 * - `embedded-ovn`: a controller that runs its OVN central(s) itself, in its own process,
 *   cannot share its groups with replicas that would start their own: it holds this lease
 *   for its lifetime, and a second such controller on the same Redis refuses to start.
 */
import type { Logger } from 'pino'
import { ConfigError } from '../lib/errors.ts'
import type { FrrController } from '../lib/frr/index.ts'
import { Leadership, type Leases } from '../lib/state/leases.ts'

/** How long a lease outlives a replica that died holding it. */
export const REPLICA_LEASE_MS = 10_000

/**
 * Runs `start` (the FRR consumer) on one replica at a time: this one while it holds the
 * `frr-consumer` lease. Every other replica keeps its own BGP speaker silent (`frr`: no
 * Hydrazine announcement): a speaker nobody updates would keep announcing a public IP
 * after its release, towards a host that no longer has it.
 */
export function leadFrrConsumer(
  leases: Leases,
  holder: string,
  frr: FrrController,
  start: () => Promise<() => Promise<void>>,
  logger: Logger,
): Leadership {
  return new Leadership({
    leases,
    name: 'frr-consumer',
    holder,
    ttlMs: REPLICA_LEASE_MS,
    lead: start,
    follow: async () => {
      const withdrawn = await silence(frr)
      if (withdrawn > 0) {
        logger.info(
          { withdrawn },
          "another replica runs the FRR consumer: this one's speaker withdrew its announcements",
        )
      }
    },
    onChange: (leading) =>
      logger.info(
        { holder },
        leading
          ? 'this replica runs the FRR consumer'
          : 'this replica no longer runs the FRR consumer',
      ),
    onError: (error) => logger.warn({ err: error }, 'FRR consumer lease'),
  })
}

/** Withdraws every Hydrazine announcement from `frr` (never an operator's); returns how many. */
export async function silence(frr: FrrController): Promise<number> {
  const { owned } = await frr.state()
  if (owned.size === 0) return 0
  const outcomes = await frr.converge(new Map([...owned.keys()].map((prefix) => [prefix, null])))
  const failed = [...outcomes.values()].filter((o) => !o.ok)
  if (failed.length > 0) {
    throw new Error(`FRR did not withdraw ${failed.map((o) => o.prefix).join(', ')}`)
  }
  return owned.size
}

/**
 * Holds the `embedded-ovn` lease while this process runs (renewed in the background);
 * refuses with a `ConfigError` naming the holder when another process has it. Resolves
 * with the function that gives it up.
 */
export async function holdEmbeddedCentral(
  leases: Leases,
  holder: string,
  logger: Logger,
): Promise<() => Promise<void>> {
  const name = 'embedded-ovn'
  if (!(await leases.take(name, holder, REPLICA_LEASE_MS))) {
    throw new ConfigError(
      `another controller (${(await leases.holder(name)) ?? 'gone since'}) runs its own ` +
        'embedded OVN central on this Redis: replicas share one central, so give each ' +
        'OVN_NB_DB and OVN_SB_DB, HYDRAZINE_OVN_CENTRALS_FILE or HYDRAZINE_OVN_CENTRAL=kubernetes',
    )
  }
  const timer = setInterval(() => {
    leases.take(name, holder, REPLICA_LEASE_MS).then(
      (held) => {
        if (!held) logger.error({ holder }, 'the embedded OVN central lease was taken by another')
      },
      (error: unknown) => logger.warn({ err: error }, 'embedded OVN central lease'),
    )
  }, REPLICA_LEASE_MS / 3)
  timer.unref()
  return async () => {
    clearInterval(timer)
    await leases.release(name, holder).catch(() => {})
  }
}

/**
 * Hydrazine's workers as their own process, so tests can run several or SIGKILL one at a
 * chosen step. Env: REDIS_URL, OVN_NB and OVN_SB (a shared central) or OVN_CENTRALS_FILE
 * (each group's, run by the test's process), QUEUE_PREFIX, PARK_FOR_COMMIT=0 (optional: no parking);
 * CRASH_AT names a checkpoint where the process kills itself with SIGKILL (once: it leaves
 * CRASH_MARK behind).
 * Prints `READY` once it consumes the queue.
 */
import { existsSync, writeFileSync } from 'node:fs'
import { pino } from 'pino'
import { openExternalCentrals } from '../../infra/centrals/external.ts'
import { startController } from '../../infra/controller.ts'
import { sharedCentralProvider } from '../../lib/ovn/central.ts'

const env = (name: string): string => {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set`)
  return value
}
const crashAt = process.env.CRASH_AT
const mark = process.env.CRASH_MARK

const controller = await startController({
  redisUrl: env('REDIS_URL'),
  ovn: process.env.OVN_CENTRALS_FILE
    ? await openExternalCentrals({ file: process.env.OVN_CENTRALS_FILE })
    : sharedCentralProvider({ nb: env('OVN_NB'), sb: env('OVN_SB') }),
  fabric: { dummyIp: '172.18.0.254/24', gateway: '172.18.0.1', physicalNetwork: 'physnet' },
  reconcileEveryMs: 0,
  prefix: env('QUEUE_PREFIX'),
  concurrency: Number(process.env.CONCURRENCY ?? 16),
  // Attaches and detaches park while their group's commit waits (`parkForCommit`, on by
  // default as in `npm start`); PARK_FOR_COMMIT=0 turns it off.
  parkForCommit: process.env.PARK_FOR_COMMIT !== '0',
  lockDurationMs: 2000,
  logger: pino({ level: process.env.LOG_LEVEL ?? 'error' }, pino.destination(2)),
  checkpoint: (point) => {
    if (point === crashAt && mark && !existsSync(mark)) {
      writeFileSync(mark, point)
      process.kill(process.pid, 'SIGKILL')
    }
  },
})
process.once('SIGTERM', () => void controller.close().then(() => process.exit(0)))
process.stdout.write('READY\n')

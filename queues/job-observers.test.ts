import { DelayedError, UnrecoverableError, WaitingChildrenError } from 'bullmq'
import t from 'tap'
import {
  dpuRepairs,
  failureLogLevel,
  type JobOutcome,
  outcomeOfError,
  reconcileRepairs,
  timed,
} from './job-observers.ts'

t.test('how a handler run ended, from what it threw', async (t) => {
  const cases: [string, unknown, { attemptsMade: number; attempts?: number }, JobOutcome][] = [
    [
      'parked until its children finish',
      new DelayedError(),
      { attemptsMade: 0, attempts: 12 },
      'waiting',
    ],
    [
      'waiting for children (flows)',
      new WaitingChildrenError(),
      { attemptsMade: 3, attempts: 4 },
      'waiting',
    ],
    [
      'unrecoverable on its first attempt',
      new UnrecoverableError('bad'),
      { attemptsMade: 0, attempts: 12 },
      'failed',
    ],
    [
      'retryable with attempts left',
      new Error('NB down'),
      { attemptsMade: 0, attempts: 12 },
      'retried',
    ],
    [
      'retryable on its last attempt',
      new Error('NB down'),
      { attemptsMade: 11, attempts: 12 },
      'failed',
    ],
    ['a job with one attempt', new Error('x'), { attemptsMade: 0 }, 'failed'],
  ]
  for (const [name, error, { attemptsMade, attempts }, outcome] of cases) {
    const job = { attemptsMade, opts: attempts === undefined ? {} : { attempts } }
    t.equal(outcomeOfError(job, error), outcome, name)
  }
})

t.test("reconcile's repairs by kind, kinds with none left out", async (t) => {
  const retried = (action: 'Retrying' | 'Stalled' | 'RetriesExhausted' | 'DeletionResumed') => ({
    kind: 'mr' as const,
    name: 'h',
    action,
    message: '',
  })
  t.same([...reconcileRepairs({ repaired: [], orphansRemoved: [], retried: [] })], [])
  t.same(
    Object.fromEntries(
      reconcileRepairs({
        repaired: ['group-a', 'group-b'],
        orphansRemoved: ['gone'],
        retried: [
          retried('Retrying'),
          retried('Retrying'),
          retried('Stalled'),
          retried('RetriesExhausted'),
          retried('DeletionResumed'),
        ],
        chassisCaRotated: [{ group: 'group-a', left: ['dpu-1', 'dpu-2'], sent: [] }],
        chassisIssued: [{ group: 'group-b', dpuId: 'dpu-3', host: 'host-3' }],
      }),
    ),
    {
      nb_drift: 2,
      orphan_rows: 1,
      retrying: 2,
      stalled: 1,
      retries_exhausted: 1,
      deletion_resumed: 1,
      chassis_ca_rotated: 1,
      chassis_certificate_issued: 1,
    },
  )
  const repair = (action: 'PortLost' | 'StrayPortIsolated' | 'RouteLost' | 'StrayVrfIsolated') => ({
    dpu: 'd',
    action,
    logicalPort: 'lp',
    jobId: 'j',
  })
  const repairs = [
    repair('PortLost'),
    repair('StrayPortIsolated'),
    repair('RouteLost'),
    repair('StrayVrfIsolated'),
  ]
  t.same(dpuRepairs({ repairs }), [
    'port_lost',
    'stray_port_isolated',
    'fabric_route_lost',
    'fabric_stray_isolated',
  ])
})

t.test('a timed handler reports each run and passes its result and errors unchanged', async (t) => {
  const runs: [string, JobOutcome][] = []
  const observers = { jobRun: (job: string, outcome: JobOutcome) => runs.push([job, outcome]) }
  const job = { attemptsMade: 0, opts: { attempts: 3 } } as never
  const ok = timed('reconcile', async () => 'report', observers)
  t.equal(await ok(job), 'report')
  const failing = timed(
    'host.attach',
    async () => {
      throw new Error('NB down')
    },
    observers,
  )
  await t.rejects(failing(job), /NB down/)
  t.same(runs, [
    ['reconcile', 'completed'],
    ['host.attach', 'retried'],
  ])
  const handler = async () => 1
  t.equal(timed('reconcile', handler, {}), handler, 'without a jobRun observer, the handler itself')
})

t.test(
  'a retried wait is logged at debug; a failure, or a wait out of attempts, at warn',
  async (t) => {
    const waiting = Object.assign(new Error('a child of host.attach vanished'), {
      code: 'NOT_READY',
    })
    const ack = Object.assign(new Error('no configure ack'), { code: 'AWAITING_ACK' })
    const broken = Object.assign(new Error('NB refused'), { code: 'OVSDB_ERROR' })
    const job = (attemptsMade: number) => ({ attemptsMade, opts: { attempts: 12 } })
    t.equal(failureLogLevel(job(3), waiting), 'debug')
    t.equal(failureLogLevel(job(3), ack), 'debug')
    t.equal(failureLogLevel(job(12), waiting), 'warn', 'no attempt left: the job failed for good')
    t.equal(failureLogLevel(job(1), broken), 'warn')
    t.equal(failureLogLevel(undefined, waiting), 'warn')
  },
)

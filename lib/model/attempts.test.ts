import t from 'tap'
import {
  conditionsOnEntering,
  failureOf,
  RETRY_BASE_MS,
  RETRY_MAX_MS,
  retryAt,
  retryDelayMs,
  startAttempt,
  withoutFailures,
} from './attempts.ts'
import type { Condition } from './objects.ts'

const at = '2026-01-01T00:00:00.000Z'
const c = (type: string, status: Condition['status'], reason = 'R'): Condition => ({
  type,
  status,
  reason,
  message: '',
  lastTransitionTime: at,
})
const failed = (reason: string, attempt?: number) => ({
  phase: 'Failed',
  configsSynced: false,
  conditions: [c('DpuHealthy', 'False', 'HeartbeatLost'), c('Attached', 'False', reason)],
  ...(attempt ? { attempt } : {}),
})

t.test('a new attempt keeps health conditions only, and counts', async (t) => {
  const next = startAttempt(failed('POOL_EXHAUSTED'), 'Attaching', {
    type: 'Attached',
    status: 'Unknown',
    reason: 'Retrying',
    message: 'again',
  })
  t.equal(next.attempt, 2)
  t.equal(next.phase, 'Attaching')
  t.same(
    next.conditions.map((x) => [x.type, x.reason]),
    [
      ['DpuHealthy', 'HeartbeatLost'],
      ['Attached', 'Retrying'],
    ],
  )
  t.equal(startAttempt(next, 'Attaching', next.conditions[1] as Condition).attempt, 3)
})

t.test('Ready drops False conditions but health', async (t) => {
  const kept = withoutFailures([
    c('Attached', 'False'),
    c('AgentConfigured', 'True'),
    c('DpuHealthy', 'False'),
  ])
  t.same(
    kept.map((x) => x.type),
    ['AgentConfigured', 'DpuHealthy'],
  )
})

const cases: { name: string; status: ReturnType<typeof failed>; retry?: number }[] = [
  {
    name: 'an empty pool is retried after the base delay',
    status: failed('POOL_EXHAUSTED'),
    retry: RETRY_BASE_MS,
  },
  {
    name: 'the third attempt waits four times as long',
    status: failed('AgentFailed', 3),
    retry: 4 * RETRY_BASE_MS,
  },
  { name: 'the wait is capped', status: failed('RetriesExhausted', 30), retry: RETRY_MAX_MS },
  { name: 'a refused spec is never retried', status: failed('IPAM_INVALID') },
  { name: 'a Ready object is not retried', status: { ...failed('X'), phase: 'Ready' } },
]
for (const k of cases) {
  t.test(k.name, async (t) => {
    const when = retryAt(k.status)
    t.equal(when === undefined ? undefined : when.getTime() - Date.parse(at), k.retry)
  })
}

t.test('the failure is the newest False condition that is not health', async (t) => {
  t.equal(failureOf(failed('POOL_EXHAUSTED'))?.reason, 'POOL_EXHAUSTED')
  t.equal(retryDelayMs(1), RETRY_BASE_MS)
})

t.test('a phase drops the conditions it makes meaningless', async (t) => {
  const retrying = c('Attached', 'Unknown', 'Retrying')
  const waiting = c('AgentConfigured', 'False', 'AwaitingAgent')
  const bound = c('AgentConfigured', 'True', 'Bound')
  const health = c('DpuHealthy', 'False', 'HeartbeatLost')
  const cases: [string, Condition[], string[]][] = [
    ['Configuring', [retrying, waiting, health], ['AgentConfigured', 'DpuHealthy']],
    ['Ready', [retrying, waiting, bound, health], ['AgentConfigured', 'DpuHealthy']],
    ['Failed', [retrying, waiting, c('Attached', 'False', 'AgentFailed')], ['Attached']],
    ['Detaching', [retrying, waiting, health], ['DpuHealthy']],
    ['Detaching', [bound], ['AgentConfigured']],
    ['Attaching', [retrying], ['Attached']],
    [
      'Terminating',
      [c('OvnConfigured', 'Unknown', 'Retrying'), c('Degraded', 'True')],
      ['Degraded'],
    ],
  ]
  for (const [phase, conditions, kept] of cases) {
    t.same(
      conditionsOnEntering(phase, conditions).map((x) => x.type),
      kept,
      `${phase}: ${conditions.map((x) => `${x.type}=${x.status}`).join(', ')}`,
    )
  }
})

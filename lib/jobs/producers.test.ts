import t from 'tap'
import { isProducerQueueName, producerQueueName } from './producers.ts'

t.test("a producer's queue is told from every other", async (t) => {
  t.ok(isProducerQueueName(producerQueueName('ci-a')), "a producer's queue")
  for (const other of [
    'hydrazine',
    '{hz-controller}hydrazine',
    '{hz-agents-3}agent-dpu-1',
    'producer-ci-a',
    '{hz-producers}producer-',
    '{hz-producers}producer-Ci_A',
    '{hz-producers}producer-ci-a:wait',
  ])
    t.notOk(isProducerQueueName(other), `${other} is not`)
})

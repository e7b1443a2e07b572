import t from 'tap'
import { type ProducerUsageBound, revokeProducersOverBound } from './producer-usage.ts'

t.test('producers over the bound lose their user; one failing holds up no other', async (t) => {
  const asked: string[] = []
  const bound: ProducerUsageBound = {
    limitBytes: 1000,
    everyMs: 0,
    measure: async () =>
      new Map([
        ['small', 1000],
        ['big', 1001],
        ['gone', 5000],
        ['broken', 9000],
        ['bigger', 70_000],
      ]),
    async revoke(producer) {
      asked.push(producer)
      if (producer === 'broken') throw new Error('ACL DELUSER refused')
      // `gone` was revoked by an earlier run: it has no user left.
      return producer !== 'gone'
    },
  }
  const { revoked, failed } = await revokeProducersOverBound(bound)
  t.same(asked, ['big', 'gone', 'broken', 'bigger'], 'only those over the bound are revoked')
  t.same(
    revoked,
    [
      { producer: 'big', bytes: 1001 },
      { producer: 'bigger', bytes: 70_000 },
    ],
    'reported once: a producer with no user left is not revoked again',
  )
  t.match(failed, [{ producer: 'broken', error: /revoking its Redis user failed: .*refused/ }])
})

import { UnrecoverableError } from 'bullmq'
import t from 'tap'
import * as v from 'valibot'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { createFrrController, createVty } from '../../lib/frr/index.ts'
import { AnnouncePayload, frrJobId } from '../../lib/jobs/frr.ts'
import { tempDir } from '../helpers/stack.ts'

t.test('a bad job fails at once, not retried, before FRR is touched', async (t) => {
  // No FRR listens here: reaching vtysh would fail with a retryable VtyshError instead.
  const frr = createFrrController({ vty: createVty({ vtyDir: await tempDir(t) }) })
  const frrSync = createFrrSync({ frr })
  const good = { publicIp: '203.0.113.7', nextHop: '172.18.0.105', owner: 'host-1', specVersion: 1 }
  const cases = [
    { name: 'unknown job name', job: { name: 'flap', data: good }, reason: /unknown FRR job name/ },
    {
      name: 'IPv6 public IP',
      job: { name: 'announce', data: { ...good, publicIp: '2001:db8::7' } },
      reason: /publicIp: must be an IPv4 address/,
    },
    {
      name: 'announce without next hop',
      job: { name: 'announce', data: { ...good, nextHop: undefined } },
      reason: /nextHop/,
    },
    {
      name: 'negative spec version',
      job: { name: 'withdraw', data: { ...good, specVersion: -1 } },
      reason: /specVersion/,
    },
    {
      name: 'no payload',
      job: { name: 'withdraw', data: null },
      reason: /invalid withdraw payload/,
    },
  ]
  for (const c of cases) {
    await t.rejects(frrSync(c.job), UnrecoverableError, c.name)
    await t.rejects(frrSync(c.job), c.reason, `${c.name}: says why`)
  }
  await t.rejects(frrSync({ name: 'announce', data: good }), { code: 'FRR_VTYSH_FAILED' })
})

t.test('job ids: one per change, owner and spec version; never a colon', async (t) => {
  const p = { publicIp: '203.0.113.7', nextHop: '172.18.0.105', owner: 'host-1', specVersion: 3 }
  t.equal(frrJobId('announce', p), 'frr-announce-203.0.113.7-host-1-v3')
  // Owners are host names (RFC 1123 labels): nothing to normalise, so no two collide.
  t.equal(v.safeParse(AnnouncePayload, { ...p, owner: 'group:a/host-1' }).success, false)
  t.not(frrJobId('announce', p), frrJobId('withdraw', p))
  t.not(frrJobId('announce', p), frrJobId('announce', { ...p, specVersion: 4 }))
})

import { UnrecoverableError } from 'bullmq'
import t from 'tap'
import * as v from 'valibot'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { createFrrController, createVty } from '../../lib/frr/index.ts'
import { AnnouncePayload, frrJobId, publicPrefix, WithdrawPayload } from '../../lib/jobs/frr.ts'
import { tempDir } from '../helpers/stack.ts'

t.test('a bad job fails at once, not retried, before FRR is touched', async (t) => {
  // No FRR listens here: reaching vtysh would fail with a retryable VtyshError instead.
  const frr = createFrrController({ vty: createVty({ vtyDir: await tempDir(t) }) })
  const frrSync = createFrrSync({ frr })
  const good = { publicIp: '203.0.113.7', nextHop: '172.18.0.105', owner: 'host-1', specVersion: 1 }
  const cases = [
    { name: 'unknown job name', job: { name: 'flap', data: good }, reason: /unknown FRR job name/ },
    {
      name: 'IPv6 public IP via an IPv4 NAT IP',
      job: { name: 'announce', data: { ...good, publicIp: '2001:db8::7' } },
      reason: /nextHop: must be of the same address family as publicIp/,
    },
    {
      name: 'IPv4 public IP via an IPv6 NAT address',
      job: { name: 'announce', data: { ...good, nextHop: 'fd00:77::105' } },
      reason: /nextHop: must be of the same address family as publicIp/,
    },
    {
      name: 'withdraw naming a next hop of the other family',
      job: { name: 'withdraw', data: { ...good, nextHop: 'fd00:77::105' } },
      reason: /nextHop: must be of the same address family/,
    },
    {
      name: 'not an address',
      job: { name: 'announce', data: { ...good, publicIp: '203.0.113.7/32' } },
      reason: /publicIp: must be an IPv4 or IPv6 address/,
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

  // IPv6: canonical, each ':' written '_'.
  const p6 = {
    publicIp: '2001:db8:ff::5',
    nextHop: 'fd00:77::105',
    owner: 'host-a',
    specVersion: 3,
  }
  t.equal(frrJobId('announce', p6), 'frr-announce-2001_db8_ff__5-host-a-v3')
  t.equal(frrJobId('withdraw', p6, 2), 'frr-withdraw-2001_db8_ff__5-host-a-v3-a2')
  t.equal(
    frrJobId('announce', { ...p6, publicIp: '2001:DB8:ff:0:0:0:0:5' }),
    frrJobId('announce', p6),
    'one address, one id however it is spelt',
  )
  t.notMatch(frrJobId('announce', p6), /:/)
})

t.test('payloads: IPv4 or IPv6, canonical, next hop of the same family', async (t) => {
  const p6 = {
    publicIp: '2001:DB8:ff::0:5',
    nextHop: 'FD00:77::105',
    owner: 'host-a',
    specVersion: 1,
  }
  t.same(v.parse(AnnouncePayload, p6), {
    ...p6,
    publicIp: '2001:db8:ff::5',
    nextHop: 'fd00:77::105',
  })
  t.same(
    v.parse(WithdrawPayload, { publicIp: '2001:db8:ff::5', owner: 'host-a', specVersion: 2 }),
    {
      publicIp: '2001:db8:ff::5',
      owner: 'host-a',
      specVersion: 2,
    },
  )
  const mixed = v.safeParse(AnnouncePayload, { ...p6, nextHop: '10.77.0.105' })
  t.equal(mixed.success, false)
  t.same(
    mixed.issues?.map((i) => v.getDotPath(i)),
    ['nextHop'],
    'the issue names nextHop',
  )
  t.equal(publicPrefix('203.0.113.7'), '203.0.113.7/32')
  t.equal(publicPrefix('2001:db8:ff::5'), '2001:db8:ff::5/128')
})

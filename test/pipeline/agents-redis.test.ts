/**
 * The agents' Redis apart from the store: DPU queues, heartbeats and DPU users live on a
 * second private Redis (as `npm start` runs it), and a DPU that fills everything its user
 * may write there leaves the control plane's store, and the API, taking writes.
 */
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { heartbeatKeyOf } from '../../lib/agent-protocol/credentials.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { agentQueueName } from '../../lib/agent-protocol/index.ts'
import { jsonCaller } from '../helpers/http.ts'
import { asUser, groupSpec, startPipeline, until } from './fixtures.ts'
import { heartbeat } from './stand-in-agent.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT = 'tenant-token-0123456789abcdef'

t.test("a DPU filling the agents' Redis costs the store nothing", async (t) => {
  const p = await startPipeline(t, { agentsRedis: true })
  t.not(p.agentsRedisUrl, p.redisUrl, "the agents' Redis is not the store's")
  const app = createApp({
    readiness: {},
    v1: {
      client: p.client,
      tokens: { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT] } },
    },
  })
  const answer = jsonCaller(app)
  const call = (method: string, path: string, token: string, body?: unknown) =>
    answer(method, path, body, token)
  const store = new Redis(p.redisUrl, { maxRetriesPerRequest: 1 })
  const agents = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: 1 })
  t.teardown(() => {
    store.disconnect()
    agents.disconnect()
  })

  t.equal((await call('PUT', '/v1/resource-groups/net-a', TENANT, groupSpec())).status, 202)
  await call('PUT', '/v1/dpus/dpu-x', OPERATOR, {
    tenantId: 'tenant-a',
    fabricIps: ['172.18.0.31', '172.18.0.131'],
    hostPorts: ['pf0hpf'],
  })
  const creds = await call('POST', '/v1/dpus/dpu-x/credentials', OPERATOR)
  t.equal(creds.status, 201, 'the operator issues DPU credentials')
  const user = creds.json.redis as { username: string; password: string }
  t.ok(await agents.call('ACL', 'GETUSER', user.username), "the DPU's user is on the agents' Redis")
  t.equal(await store.call('ACL', 'GETUSER', user.username), null, "and not on the store's")

  // A DPU's agent with them: jobs in, acks out, its heartbeat read, all on the agents' Redis.
  await p.agent('dpu-x', { redis: user, protocolVersions: ['1.0', '2.0'] })
  const put = await call('PUT', '/v1/managed-resources/host-x', TENANT, {
    resourceGroup: 'net-a',
    hostMAC: '52:54:00:00:ab:01',
    dpu: { id: 'dpu-x' },
  })
  t.equal(put.status, 202)
  const ready = await until(
    () => p.client.getHost('host-x'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(ready?.status.phase, 'Ready', "a host turns Ready from its DPU's acks")
  const dpus = await call('GET', '/v1/dpus', OPERATOR)
  t.match(dpus.json.items, [{ id: 'dpu-x', state: 'Online' }], 'its heartbeat is read')
  const queueKeys = `${p.prefix}:${agentQueueName('dpu-x')}:*`
  t.ok((await agents.keys(queueKeys)).length > 0, "its queue is on the agents' Redis")
  t.same(await store.keys(queueKeys), [], "and nothing of it on the store's")
  t.equal(await store.exists(heartbeatKeyOf('dpu-x')), 0, 'nor its heartbeat')

  // The DPU, compromised, writes all it may: one value is bounded (proto-max-bulk-len)…
  const dpu = new Redis(asUser(p.agentsRedisUrl, user), { maxRetriesPerRequest: 1 })
  t.teardown(() => dpu.disconnect())
  const own = `${p.prefix}:${agentQueueName('dpu-x')}:filler`
  await t.rejects(
    dpu.set(own, 'x'.repeat(2 * 1024 * 1024)),
    /invalid bulk length|Protocol error/,
    'a 2 MB value is refused',
  )
  await t.rejects(dpu.setrange(own, 70 * 1024 * 1024, 'x'), /NOPERM/, 'as is growing one')
  // …and then many values fill the agents' Redis up to its bound (lowered here to 32 MB so
  // the test does not take half a gigabyte).
  await agents.call('CONFIG', 'SET', 'maxmemory', '32mb')
  const chunk = 'x'.repeat(512 * 1024)
  let full: unknown
  for (let i = 0; i < 256 && !full; i++) {
    full = await dpu.set(`${own}-${i}`, chunk).then(
      () => undefined,
      (error: unknown) => error,
    )
  }
  t.match(String(full), /OOM/, "the agents' Redis is full")

  // The control plane keeps taking writes: a tenant's group, and the store itself.
  const second = await call(
    'PUT',
    '/v1/resource-groups/net-b',
    TENANT,
    groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'),
  )
  t.equal(second.status, 202, "a tenant's group PUT is accepted")
  const net = await until(
    () => p.client.getGroup('net-b'),
    (g) => g?.status.phase === 'Ready',
  )
  t.equal(net?.status.phase, 'Ready', 'and the group turns Ready')
  t.equal(await store.set('hz:probe', 'ok'), 'OK', 'the store takes writes')
})

t.test("a DPU over its bound in the agents' Redis loses its credentials", async (t) => {
  const metrics = new Registry()
  const p = await startPipeline(t, {
    agentsRedis: true,
    dpuRedisBound: { limitBytes: 1024 * 1024, everyMs: 0 },
    metrics,
  })
  await p.controller.queue.upsertJobScheduler(
    'dpu.health',
    { every: 250 },
    { name: 'dpu.health', data: {}, opts: { removeOnComplete: { count: 10 } } },
  )
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens: { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT] } } },
  })
  const answer = jsonCaller(app)
  const call = (method: string, path: string, token: string, body?: unknown) =>
    answer(method, path, body, token)
  await call('PUT', '/v1/resource-groups/net-a', TENANT, groupSpec())
  for (const [id, n] of [
    ['dpu-big', 41],
    ['dpu-ok', 42],
  ] as const) {
    await call('PUT', `/v1/dpus/${id}`, OPERATOR, {
      tenantId: 'tenant-a',
      fabricIps: [`172.18.0.${n}`, `172.18.0.${n + 100}`],
      hostPorts: ['pf0hpf'],
    })
  }
  const users = new Map<string, { username: string; password: string }>()
  for (const id of ['dpu-big', 'dpu-ok']) {
    const creds = await call('POST', `/v1/dpus/${id}/credentials`, OPERATOR)
    users.set(id, creds.json.redis)
  }
  await p.agent('dpu-ok', {
    redis: users.get('dpu-ok') as { username: string; password: string },
    protocolVersions: ['1.0', '2.0'],
  })
  // dpu-big's "agent" only beats, as its own user: it is after the agents' Redis.
  const big = users.get('dpu-big') as { username: string; password: string }
  const dpu = new Redis(asUser(p.agentsRedisUrl, big), { maxRetriesPerRequest: 1 })
  dpu.on('error', () => {})
  t.teardown(() => dpu.disconnect())
  await new Heartbeats(dpu).write(heartbeat('dpu-big', ['1.0', '2.0']), 60_000)
  for (const [host, dpuId, mac] of [
    ['h-big', 'dpu-big', '52:54:00:00:bb:01'],
    ['h-ok', 'dpu-ok', '52:54:00:00:bb:02'],
  ] as const) {
    await call('PUT', `/v1/managed-resources/${host}`, TENANT, {
      resourceGroup: 'net-a',
      hostMAC: mac,
      dpu: { id: dpuId },
    })
  }
  const ready = await until(
    () => p.client.getHost('h-ok'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(ready?.status.phase, 'Ready', 'h-ok is Ready')

  // dpu-big writes 1.5 MB under its own queue's keys, each value within the 1 MB bulk bound.
  for (let i = 0; i < 3; i++) {
    await dpu.set(`${p.prefix}:${agentQueueName('dpu-big')}:filler-${i}`, 'x'.repeat(512 * 1024))
  }
  const host = await until(
    () => p.client.getHost('h-big'),
    (h) =>
      h?.status.conditions.some((c) => c.type === 'DpuHealthy' && c.status === 'False') ?? false,
  )
  t.match(
    host?.status.conditions.find((c) => c.type === 'DpuHealthy'),
    {
      status: 'False',
      reason: 'CredentialsRevoked',
      message: /held \d+ bytes in the agents' Redis/,
    },
    "its hosts say the DPU's credentials were revoked",
  )
  const probe = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: 1 })
  t.teardown(() => probe.disconnect())
  await t.rejects(probe.call('AUTH', big.username, big.password), /WRONGPASS/, 'its user is gone')
  const events = await call('GET', '/v1/dpus/dpu-big/events', OPERATOR)
  // Among its others (its first heartbeat's, which may come before or after).
  t.match(
    (events.json.items as { reason: string }[]).filter((e) => e.reason === 'CredentialsRevoked'),
    [{ type: 'Warning', message: /holds \d+ bytes in the agents' Redis, over its bound/ }],
    'the DPU has an event',
  )
  const scraped = await metrics.getSingleMetricAsString('hydrazine_dpu_credentials_revoked_total')
  t.match(scraped, /hydrazine_dpu_credentials_revoked_total 1$/m, 'and the metric counts it')

  // The other DPU keeps its credentials and its host its health.
  const ok = users.get('dpu-ok') as { username: string; password: string }
  t.equal(await probe.call('AUTH', ok.username, ok.password), 'OK', "dpu-ok's user stays")
  const other = await p.client.getHost('h-ok')
  t.notOk(
    other?.status.conditions.some((c) => c.type === 'DpuHealthy' && c.status === 'False'),
    'and its host stays healthy',
  )
})

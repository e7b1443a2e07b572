/**
 * The pipeline on a real 3-master Redis Cluster (`redis+cluster://…`): the controller,
 * stand-in agents connecting with their issued (ACL-confined) credentials, the FRR
 * consumer and reconcile, end to end; and the load lands on every master, not one.
 */
import { Queue } from 'bullmq'
import t from 'tap'
import { createCredentialIssuer } from '../../infra/credentials.ts'
import { heartbeatKeyOf } from '../../lib/agent-protocol/credentials.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { agentQueueName } from '../../lib/agent-protocol/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { hashTagOf } from '../../lib/redis/slots.ts'
import type { LocalRedisCluster } from '../helpers/redis-cluster.ts'
import { asUser, dpuFabricIps, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { runReconcile, startPipelineFrr } from './scenarios.ts'

/** How many keys each master of the cluster holds. */
async function keysPerNode(cluster: LocalRedisCluster): Promise<number[]> {
  return Promise.all(cluster.ports.map((_, i) => cluster.node(i).dbsize()))
}

t.test('attach, public IP, detach and teardown on a Redis Cluster', async (t) => {
  const p = await startPipeline(t, { frr: true, redisCluster: true })
  t.match(p.redisUrl, /^redis\+cluster:\/\//, 'the controller runs on the cluster')
  // Two DPUs whose queues sit in different shards (slots).
  t.not(hashTagOf(agentQueueName('dpu-1')), hashTagOf(agentQueueName('dpu-2')))
  const frr = await startPipelineFrr(t, p)

  // The inventory issues each DPU a Redis user, on every master, confined to its queue.
  for (const dpu of ['dpu-1', 'dpu-2']) {
    await p.client.applyDpu(dpu, { fabricIps: dpuFabricIps(dpu) })
  }
  const credentials = await p.client.issueDpuCredentials('dpu-1')
  const agent1 = await p.agent('dpu-1', {
    protocolVersions: ['1.0', '2.0'],
    redis: credentials.redis,
  })
  await p.agent('dpu-2', {
    protocolVersions: ['1.0', '2.0'],
    redis: (await p.client.issueDpuCredentials('dpu-2')).redis,
  })

  await p.client.registerPublicIp('203.0.113.7')
  await p.client.applyGroup('group-a', groupSpec())
  await p.client.applyHost(
    'host-1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'PublicAccess' }),
  )
  await p.client.applyHost('host-2', hostSpec('group-a', 'dpu-2', 2))
  for (const name of ['host-1', 'host-2']) {
    const host = await until(
      () => p.controller.store.hosts.get(name),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(host?.status.phase, 'Ready', `${name} is Ready`)
    t.equal(host?.status.configsSynced, true, `${name}: its agent acked`)
  }
  t.ok(
    agent1.jobs.some((j) => j.name === 'configure'),
    'dpu-1 ran its configure as its own Redis user',
  )
  const host1 = await p.controller.store.hosts.get('host-1')
  t.equal(host1?.status.hostAccessIPs?.publicIP, '203.0.113.7')
  t.equal((await frr.table()).get('203.0.113.7/32'), '172.18.0.111', 'FRR announces P/32')
  t.ok(await p.switchPort(topologyNames.hostPort('group-a', 'host-2')), 'NB has host-2')
  t.same(
    (await new Heartbeats(p.controller.redis).list()).map((b) => b.dpuId),
    ['dpu-1', 'dpu-2'],
    "both DPUs' heartbeats are read from the cluster",
  )

  // Every master holds part of it: the store, the controller's queue, agent shards, IPAM.
  const perNode = await keysPerNode(p.redisCluster as LocalRedisCluster)
  t.ok(
    perNode.every((n) => n > 0),
    `every master holds keys (${perNode.join(', ')})`,
  )

  const report = await runReconcile(p, 'reconcile-cluster')
  t.same(report.failed, [], 'reconcile applies every group')
  t.same(report.orphansRemoved, [], 'and finds nothing to delete')

  await p.client.deleteHost('host-1')
  await p.client.deleteHost('host-2')
  for (const name of ['host-1', 'host-2']) {
    await until(
      () => p.controller.store.hosts.get(name),
      (h) => h === undefined,
    )
  }
  t.equal((await frr.table()).get('203.0.113.7/32'), undefined, 'the prefix was withdrawn')
  t.same(await p.client.publicIp('203.0.113.7'), { ip: '203.0.113.7', allocated: false })
  await p.client.deleteGroup('group-a')
  await until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g === undefined,
  )
  t.same(await p.ownedRows(), [], 'no Hydrazine row left in NB')
})

t.test("an agent's credentials on a cluster reach its own queue only", async (t) => {
  const p = await startPipeline(t, { redisCluster: true })
  await p.client.applyDpu('dpu-1', { fabricIps: dpuFabricIps('dpu-1') })
  const { redis } = await p.client.issueDpuCredentials('dpu-1')
  const cluster = p.redisCluster as LocalRedisCluster
  for (let i = 0; i < cluster.ports.length; i++) {
    const node = cluster.node(i)
    const users = (await node.call('ACL', 'USERS')) as string[]
    t.ok(users.includes(redis.username), `master ${i} knows ${redis.username}`)
  }
  // As that user, on the cluster: its own queue works; another DPU's queue and the store
  // are refused, on whichever master holds them.
  const connection = createRedis({ url: asUser(p.redisUrl, redis) }, { maxRetriesPerRequest: null })
  t.teardown(() => connection.disconnect())
  const own = new Queue(agentQueueName('dpu-1'), { connection, prefix: p.prefix })
  const other = new Queue(agentQueueName('dpu-2'), { connection, prefix: p.prefix })
  t.teardown(async () => {
    await own.close()
    await other.close()
  })
  t.ok(await own.add('probe', {}), 'its own queue takes a job')
  await t.rejects(other.add('probe', {}), /NOPERM/, "another DPU's queue is refused")
  await t.rejects(connection.get('hz:{store}:rg:group-a'), /NOPERM/, 'the desired state is refused')

  // A user an older version issued names keys since renamed: refreshed at start, its
  // password untouched, it reaches today's queue and heartbeat again.
  for (let i = 0; i < cluster.ports.length; i++) {
    await cluster.node(i).call('ACL', 'SETUSER', redis.username, 'resetkeys', '~bull:agent-dpu-1:*')
  }
  await t.rejects(
    connection.set(heartbeatKeyOf('dpu-1'), '{}', 'PX', 1000),
    /NOPERM/,
    'with the old patterns, its heartbeat is refused',
  )
  const issuer = createCredentialIssuer({ redis: p.controller.redis, queuePrefix: p.prefix })
  t.same(await issuer.refreshKeys(['dpu-1', 'dpu-9']), ['dpu-1'], 'only existing users')
  t.ok(await connection.set(heartbeatKeyOf('dpu-1'), '{}', 'PX', 1000), 'refreshed: it beats')
  t.ok(await own.add('probe-2', {}), 'and its queue takes jobs')
})

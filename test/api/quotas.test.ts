/**
 * Per-tenant quotas (`HYDRAZINE_QUOTAS`) against a running pipeline, through HTTP and
 * gRPC: a request that would give a tenant one group, host or public IP more than its
 * quota is refused 403 QUOTA_EXCEEDED (gRPC RESOURCE_EXHAUSTED) and stores and enqueues
 * nothing; changing an existing object is never refused; a purged object frees its
 * slot; racing creations cannot pass a quota together; other tenants are not touched.
 */
import * as grpc from '@grpc/grpc-js'
import { Redis } from 'ioredis'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { createApp } from '../../api/http/app.ts'
import { HydrazineClient } from '../../app/index.ts'
import { DEFAULT_QUOTAS, type Quotas } from '../../lib/model/quotas.ts'
import { duplicateClient } from '../../lib/redis/connection.ts'
import { ChangeFeed } from '../../lib/state/changes.ts'
import { jsonCaller } from '../helpers/http.ts'
import type { Teardown } from '../helpers/stack.ts'
import {
  DHCP_SERVER,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from '../pipeline/fixtures.ts'
import { refusalSnapshot } from '../pipeline/scenarios.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT_A = 'tenant-a-token-0123456789abcdef'
const TOKENS = { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT_A] } }

const QUOTAS: Quotas = {
  default: DEFAULT_QUOTAS.default,
  tenants: {
    'tenant-a': { groups: 2, hosts: 2, publicIps: 1 },
    'tenant-c': { groups: 2, hosts: 1 },
  },
}

/**
 * What a refused request must leave alone (`refusalSnapshot`), without the statuses the
 * running jobs of earlier requests are still writing.
 */
async function stored(p: Pipeline) {
  const { groups, hosts, publicIps, jobs } = await refusalSnapshot(p)
  const specs = (objects: readonly { name: string; spec: unknown; specVersion: number }[]) =>
    objects.map(({ name, spec, specVersion }) => ({ name, spec, specVersion }))
  return { groups: specs(groups), hosts: specs(hosts), publicIps, jobs }
}

/** The pipeline's client as the controller builds it, with QUOTAS as its policy. */
function quotaClient(t: Teardown, p: Pipeline): HydrazineClient {
  const { store, queue, ipam, heartbeats, redis } = p.controller
  const changes = new ChangeFeed(() => duplicateClient(redis), store.changeLog)
  t.teardown(() => changes.close())
  return new HydrazineClient({
    store,
    queue,
    ipam,
    heartbeats,
    changes,
    policy: { dhcpServers: [DHCP_SERVER], quotas: QUOTAS },
  })
}

t.test('per-tenant quotas of groups, hosts and public IPs', async (t) => {
  const p = await startPipeline(t)
  const client = quotaClient(t, p)
  const app = createApp({ readiness: {}, v1: { client, tokens: TOKENS } })
  const call = jsonCaller(app, OPERATOR)

  const ingress = createGrpcServer({ client, tokens: TOKENS })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const rpc = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => rpc.close())
  for (const dpu of ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4']) await p.agent(dpu)

  const specA = (n: number) => groupSpec('tenant-a', `10.1.${n}.0/24`, `10.1.${n}.1`)

  t.test('groups: the third of a tenant limited to 2 is refused, changing nothing', async (t) => {
    t.equal((await call('PUT', '/v1/resource-groups/group-a1', specA(1), TENANT_A)).status, 202)
    t.equal((await call('PUT', '/v1/resource-groups/group-a2', specA(2))).status, 202)

    const before = await stored(p)
    const third = await call('PUT', '/v1/resource-groups/group-a3', specA(3), TENANT_A)
    t.equal(third.status, 403)
    t.equal(third.json.error.code, 'QUOTA_EXCEEDED')
    t.match(third.json.error.message, /tenant-a .*quota "groups" of 2 resource groups/)
    const byOperator = await call('PUT', '/v1/resource-groups/group-a3', specA(3))
    t.equal(byOperator.status, 403, "an operator's request counts against the tenant too")
    t.equal(byOperator.json.error.code, 'QUOTA_EXCEEDED')
    t.same(await stored(p), before, 'nothing stored, nothing enqueued')

    const md = new grpc.Metadata()
    md.set('authorization', `Bearer ${TENANT_A}`)
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      rpc.applyResourceGroup(
        { name: 'group-a3', spec: specA(3) },
        md,
        (e: grpc.ServiceError | null) => resolve(e),
      ),
    )
    t.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED, 'gRPC: RESOURCE_EXHAUSTED')
    t.same(error?.metadata.get('hz-code'), ['QUOTA_EXCEEDED'])

    const same = await call('PUT', '/v1/resource-groups/group-a1', specA(1), TENANT_A)
    t.equal(same.status, 200, 'the same spec of an existing group again: not refused')
    const changed = await call(
      'PUT',
      '/v1/resource-groups/group-a1',
      { ...specA(1), dhcpServer: DHCP_SERVER },
      TENANT_A,
    )
    t.equal(changed.status, 202, 'a change to an existing group: not refused')
    const other = await call('PUT', '/v1/resource-groups/group-b1', groupSpec('tenant-b'))
    t.equal(other.status, 202, "another tenant is not held to tenant-a's quota")
  })

  t.test('groups: racing creations cannot pass the quota together', async (t) => {
    const names = [1, 2, 3, 4, 5, 6].map((n) => `group-c${n}`)
    const results = await Promise.allSettled(
      names.map((name, i) =>
        client.applyGroup(name, groupSpec('tenant-c', `10.3.${i}.0/24`, `10.3.${i}.1`)),
      ),
    )
    t.equal(results.filter((r) => r.status === 'fulfilled').length, 2, 'exactly the quota')
    t.ok(
      results.every(
        (r) =>
          r.status === 'fulfilled' || (r.reason as { code?: string }).code === 'QUOTA_EXCEEDED',
      ),
    )
    t.equal((await p.controller.store.groups.list({ tenant: 'tenant-c' })).length, 2)
  })

  t.test(
    'hosts: the third of a tenant limited to 2 is refused; a purge frees a slot',
    async (t) => {
      const host = (n: number, extra: object = {}) =>
        hostSpec(n % 2 ? 'group-a1' : 'group-a2', `dpu-${n}`, n, {
          hostAccess: 'FabricAccess',
          ...extra,
        })
      const nothing = await stored(p)
      const port = (n: number) => {
        const { resourceGroup, hostMAC, dpu } = hostSpec('group-a2', `dpu-${n}`, n)
        return { name: `eth${n}`, resourceGroup, hostMAC, dpu }
      }
      const wide = await call(
        'PUT',
        '/v1/managed-resources/host-0',
        hostSpec('group-a1', 'dpu-7', 7, { interfaces: [port(8), port(9)] }),
      )
      t.equal(wide.status, 403, 'a host whose interfaces together pass the quota: refused')
      t.match(wide.json.error.message, /quota "hosts" of 2/)
      t.same(await stored(p), nothing, 'nothing stored, nothing enqueued')

      t.equal((await call('PUT', '/v1/managed-resources/host-1', host(1))).status, 202)
      t.equal((await call('PUT', '/v1/managed-resources/host-2', host(2))).status, 202)

      const before = await stored(p)
      const third = await call('PUT', '/v1/managed-resources/host-3', host(3))
      t.equal(third.status, 403)
      t.equal(third.json.error.code, 'QUOTA_EXCEEDED')
      t.match(third.json.error.message, /quota "hosts" of 2/)
      t.same(await stored(p), before, 'nothing stored, nothing enqueued')
      t.equal(await p.controller.store.dpus.get('dpu-3'), undefined, 'its DPU was not added either')
      t.equal(
        (await call('PUT', '/v1/managed-resources/host-1', host(1, { hostAccess: 'None' }))).status,
        202,
        'a change to an existing host: not refused',
      )

      t.equal((await call('DELETE', '/v1/managed-resources/host-2')).status, 202)
      await until(
        () => p.controller.store.hosts.get('host-2'),
        (h) => h === undefined,
      )
      t.equal(
        (await call('PUT', '/v1/managed-resources/host-3', host(3))).status,
        202,
        'a purged host no longer counts',
      )

      const groupC = (await p.controller.store.groups.list({ tenant: 'tenant-c' }))[0]?.name
      t.ok(groupC)
      const racedC = await Promise.allSettled(
        [5, 6, 7].map((n) =>
          client.applyHost(`host-d${n}`, hostSpec(groupC ?? '', `dpu-${n + 20}`, n)),
        ),
      )
      t.equal(
        racedC.filter((r) => r.status === 'fulfilled').length,
        1,
        'racing hosts of a tenant limited to 1: exactly one stored',
      )
    },
  )

  t.test(
    'public IPs: a host becoming PublicAccess counts; leaving it frees the slot',
    async (t) => {
      await client.registerPublicIp('203.0.113.10')
      await client.registerPublicIp('203.0.113.11')
      const access = (n: number, hostAccess: string) =>
        hostSpec(n % 2 ? 'group-a1' : 'group-a2', `dpu-${n}`, n, { hostAccess })

      t.equal(
        (await call('PUT', '/v1/managed-resources/host-1', access(1, 'PublicAccess'))).status,
        202,
        'the first PublicAccess host of tenant-a (quota 1)',
      )
      // Its job takes the address, then adds its child that announces it (after a park,
      // when its group's commit was paced): then nothing moves until the next request.
      await until(
        () => client.listPublicIps(),
        (ips) => ips.some((ip) => ip.allocatedTo === 'host-1'),
      )
      const before = await until(
        () => stored(p),
        (s) => s.jobs.some((job) => job.startsWith('publicip.allocate publicip.allocate-host-1-')),
      )
      const second = await call('PUT', '/v1/managed-resources/host-3', access(3, 'PublicAccess'))
      t.equal(second.status, 403)
      t.equal(second.json.error.code, 'QUOTA_EXCEEDED')
      t.match(second.json.error.message, /quota "publicIps" of 1/)
      t.same(await stored(p), before, 'nothing stored, nothing enqueued')
      t.equal(
        (await p.controller.store.hosts.get('host-3'))?.spec.hostAccess,
        'FabricAccess',
        'the host is as it was',
      )
      const again = await call('PUT', '/v1/managed-resources/host-1', access(1, 'PublicAccess'))
      t.not(again.status, 403, 'the PublicAccess host applied again: not refused')
      t.equal(again.json.jobId, undefined, 'nor changed')

      t.equal(
        (await call('PUT', '/v1/managed-resources/host-1', access(1, 'FabricAccess'))).status,
        202,
      )
      t.equal(
        (await call('PUT', '/v1/managed-resources/host-3', access(3, 'PublicAccess'))).status,
        202,
        'a host that left PublicAccess frees its slot',
      )
    },
  )
})

t.test('hosts stored before quotas were kept are counted once, at start-up', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-old', groupSpec('tenant-old'))
  await p.client.applyHost('old-1', hostSpec('group-old', 'dpu-1', 1))
  await p.client.applyHost('old-2', hostSpec('group-old', 'dpu-1', 2, { identifier: 'pf9' }))
  const redis = new Redis(p.redisUrl)
  t.teardown(() => redis.disconnect())
  // As a store written before quotas: no sets, no marker.
  await redis.del('hz:{store}:tenant:tenant-old:hosts', 'hz:{store}:quota-sets-v1')
  await p.controller.store.quotas.countStoredHosts()
  t.same((await redis.smembers('hz:{store}:tenant:tenant-old:hosts')).sort(), ['old-1', 'old-2'])
})

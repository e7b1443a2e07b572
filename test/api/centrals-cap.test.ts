/**
 * The site's cap on running OVN centrals (`HYDRAZINE_MAX_CENTRALS`), on the API over a real
 * Redis. A group runs its central while it has hosts, so an empty group holds no slot and
 * is never refused; the first host of a group without a central past the cap is refused —
 * HTTP 503 CENTRALS_EXHAUSTED, gRPC RESOURCE_EXHAUSTED — whoever asks, naming the setting,
 * and changes nothing; more hosts of a group holding a slot still attach; racing first
 * hosts cannot pass it together; a central given back frees its slot.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { jsonCaller } from '../helpers/http.ts'
import { groupSpec, hostSpec } from '../helpers/requests.ts'
import { startContract } from './contract.ts'
import { hostMessage } from './grpc-fixture.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT_A = 'tenant-a-token-0123456789abcdef'
const TOKENS = { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT_A] } }
const MAX = 2
const DHCP_SERVER = '192.0.2.53'

t.test('the cap counts running centrals: the first host past it is refused', async (t) => {
  const c = await startContract(t, { policy: { dhcpServers: [DHCP_SERVER], maxCentrals: MAX } })
  const { app } = c.app(TOKENS)
  const call = jsonCaller(app, OPERATOR)
  const spec = (tenant: string, n: number) => groupSpec(tenant, `10.1.${n}.0/24`, `10.1.${n}.1`)

  const groups = ['group-a1', 'group-a2', 'group-a3', 'group-a4', 'group-a5']
  for (const [i, name] of groups.entries()) {
    const put = await call('PUT', `/v1/resource-groups/${name}`, spec('tenant-a', i + 1))
    t.equal(put.status, 202, `${name}: an empty group holds no central, past the cap too`)
  }
  t.same(await c.store.centrals.list(), [], 'no group holds a central yet')

  const host = (name: string, group: string, n: number) =>
    call('PUT', `/v1/managed-resources/${name}`, hostSpec(group, `dpu-${n}`, n))
  t.equal((await host('h1', 'group-a1', 1)).status, 202, "group-a1's first host")
  t.equal((await host('h2', 'group-a2', 2)).status, 202, "group-a2's first host")
  t.same(await c.store.centrals.list(), ['group-a1', 'group-a2'], 'each took its slot')

  const before = await c.snapshot()
  const refused = await call('PUT', '/v1/managed-resources/h3', hostSpec('group-a3', 'dpu-3', 3))
  t.equal(refused.status, 503, 'the site is full, not the tenant: 503')
  t.equal(refused.json.error.code, 'CENTRALS_EXHAUSTED')
  t.match(refused.json.error.message, /maximum of 2 OVN centrals \(HYDRAZINE_MAX_CENTRALS\)/)
  t.same(await c.snapshot(), before, 'nothing stored, nothing enqueued')
  t.notOk(await c.store.hosts.get('h3'), 'no host h3')

  t.equal(
    (await host('h4', 'group-a1', 4)).status,
    202,
    'a group holding its slot takes more hosts',
  )
  const changed = await call('PUT', '/v1/resource-groups/group-a3', {
    ...spec('tenant-a', 3),
    dhcpServer: DHCP_SERVER,
  })
  t.equal(changed.status, 202, 'a change to a group is never refused')

  const ingress = createGrpcServer({ client: c.client, tokens: TOKENS })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const rpc = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => rpc.close())
  const md = new grpc.Metadata()
  md.set('authorization', `Bearer ${OPERATOR}`)
  const error = await new Promise<grpc.ServiceError | null>((resolve) =>
    rpc.applyManagedResource(
      { name: 'h3', spec: hostMessage('group-a3', 'dpu-3', 3) },
      md,
      (e: grpc.ServiceError | null) => resolve(e),
    ),
  )
  t.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED, 'gRPC: RESOURCE_EXHAUSTED')
  t.same(error?.metadata.get('hz-code'), ['CENTRALS_EXHAUSTED'])

  // group-a2's central given back (its last host gone and its grace over).
  t.ok(await c.store.hosts.purge('h2', 'group-a2', 'dpu-2'), 'h2 purged')
  await c.store.centrals.idleSince('group-a2', Date.now() - 60_000)
  t.equal(await c.store.centrals.releaseIfIdle('group-a2', Date.now(), 30_000), 'released')
  const raced = await Promise.allSettled(
    ['group-a3', 'group-a4', 'group-a5'].map((group, i) =>
      c.client.applyHost(`r${i}`, hostSpec(group, `dpu-${10 + i}`, 10 + i)),
    ),
  )
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'one takes the freed slot')
  t.ok(
    raced.every(
      (r) =>
        r.status === 'fulfilled' ||
        (r.reason as { code?: string } | undefined)?.code === 'CENTRALS_EXHAUSTED',
    ),
    'the others are refused for the cap',
  )
  t.equal((await c.store.centrals.list()).length, MAX, 'never more centrals than the cap')
})

t.test("a group's slot: given back only without hosts, after the grace period", async (t) => {
  const c = await startContract(t, { policy: { dhcpServers: [DHCP_SERVER], maxCentrals: MAX } })
  const { app } = c.app(TOKENS)
  const call = jsonCaller(app, OPERATOR)
  await call('PUT', '/v1/resource-groups/g', groupSpec('tenant-a'))
  await call('PUT', '/v1/managed-resources/h1', hostSpec('g', 'dpu-1', 1))
  const now = Date.now()
  t.equal(await c.store.centrals.releaseIfIdle('g', now, 1000), 'busy', 'a host holds it')
  t.ok(await c.store.hosts.purge('h1', 'g', 'dpu-1'))
  t.equal(await c.store.centrals.releaseIfIdle('g', now, 1000), 'recent', 'no idle mark yet')
  await c.store.centrals.idleSince('g', now)
  t.equal(await c.store.centrals.releaseIfIdle('g', now + 999, 1000), 'recent', 'within grace')
  t.equal(await c.store.centrals.releaseIfIdle('g', now + 1000, 1000), 'released')
  t.equal(await c.store.centrals.releaseIfIdle('g', now + 2000, 1000), 'not-held')
  t.same(await c.store.centrals.list(), [])
})

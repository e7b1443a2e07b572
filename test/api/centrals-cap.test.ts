/**
 * The site's cap on OVN centrals (`HYDRAZINE_MAX_CENTRALS`: each group runs one), on the
 * API over a real Redis: a new group past it is refused — HTTP 503 CENTRALS_EXHAUSTED,
 * gRPC RESOURCE_EXHAUSTED — whoever asks, naming the setting, and changes nothing; an
 * existing group still changes; racing creations cannot pass it together; a purged group
 * frees its central's place.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { jsonCaller } from '../helpers/http.ts'
import { groupSpec } from '../helpers/requests.ts'
import { startContract } from './contract.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT_A = 'tenant-a-token-0123456789abcdef'
const TOKENS = { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT_A] } }
const MAX = 3
const DHCP_SERVER = '192.0.2.53'

t.test('a site at its maximum of centrals refuses a new group, and only that', async (t) => {
  const c = await startContract(t, { policy: { dhcpServers: [DHCP_SERVER], maxCentrals: MAX } })
  const { app } = c.app(TOKENS)
  const call = jsonCaller(app, OPERATOR)
  const spec = (tenant: string, n: number) => groupSpec(tenant, `10.1.${n}.0/24`, `10.1.${n}.1`)

  t.equal((await call('PUT', '/v1/resource-groups/group-a1', spec('tenant-a', 1))).status, 202)
  t.equal((await call('PUT', '/v1/resource-groups/group-b1', spec('tenant-b', 2))).status, 202)
  t.equal((await call('PUT', '/v1/resource-groups/group-b2', spec('tenant-b', 3))).status, 202)

  const before = await c.snapshot()
  const refused = await call('PUT', '/v1/resource-groups/group-a2', spec('tenant-a', 4), TENANT_A)
  t.equal(refused.status, 503, 'the site is full, not the tenant: 503')
  t.equal(refused.json.error.code, 'CENTRALS_EXHAUSTED')
  t.match(refused.json.error.message, /maximum of 3 OVN centrals.*HYDRAZINE_MAX_CENTRALS/)
  const byOperator = await call('PUT', '/v1/resource-groups/group-c1', spec('tenant-c', 5))
  t.equal(byOperator.status, 503, "an operator's new group is held to it too")
  t.same(await c.snapshot(), before, 'nothing stored, nothing enqueued')

  const changed = await call('PUT', '/v1/resource-groups/group-a1', {
    ...spec('tenant-a', 1),
    dhcpServer: DHCP_SERVER,
  })
  t.equal(changed.status, 202, 'a change to an existing group is never refused')

  const ingress = createGrpcServer({ client: c.client, tokens: TOKENS })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const rpc = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => rpc.close())
  const md = new grpc.Metadata()
  md.set('authorization', `Bearer ${TENANT_A}`)
  const error = await new Promise<grpc.ServiceError | null>((resolve) =>
    rpc.applyResourceGroup(
      { name: 'group-a2', spec: spec('tenant-a', 4) },
      md,
      (e: grpc.ServiceError | null) => resolve(e),
    ),
  )
  t.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED, 'gRPC: RESOURCE_EXHAUSTED')
  t.same(error?.metadata.get('hz-code'), ['CENTRALS_EXHAUSTED'])

  t.ok(await c.store.groups.purge('group-b2', 'tenant-b'), 'group-b2 purged')
  const names = [1, 2, 3, 4, 5].map((n) => `group-r${n}`)
  const raced = await Promise.allSettled(
    names.map((name, i) => c.client.applyGroup(name, spec('tenant-d', 10 + i))),
  )
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'one takes the freed place')
  t.ok(
    raced.every(
      (r) =>
        r.status === 'fulfilled' ||
        (r.reason as { code?: string } | undefined)?.code === 'CENTRALS_EXHAUSTED',
    ),
    'the others are refused for the cap',
  )
  t.equal((await c.store.groups.list()).length, MAX, 'never more groups than centrals')
})

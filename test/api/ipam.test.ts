/**
 * A group's subnets, named pools and reservations over the API, on a real Redis and OVN:
 * hosts get addresses from the pool they name and never a reserved one, a subnet added by
 * re-PUT reaches NB's router as a network while every address stays held, a change that
 * would orphan a held address is refused (409, naming the field), and `GET …/ipam` draws
 * the map, for the group's own tenant only — as does gRPC's GetResourceGroupIpam, with the
 * same answer typed.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import { createApp } from '../../api/http/app.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'
import { startIngress } from './grpc-fixture.ts'

function api(p: Pipeline) {
  const app = createApp({
    readiness: { redis: async () => true },
    v1: {
      client: p.client,
      tokens: TEST_TOKENS,
    },
  })
  return async (method: string, path: string, body?: unknown, token = OPERATOR) => {
    const res = await app.request(path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
    const json: any = text ? JSON.parse(text) : undefined
    return { status: res.status, json }
  }
}

/**
 * A GetResourceGroupIpamResponse as the HTTP API writes the same map: the map format's
 * enum as its word, and no proto3 `optional` markers (`_name`) or unset optionals.
 */
// biome-ignore lint/suspicious/noExplicitAny: gRPC answers are inspected loosely in tests
function asHttpJson(message: any): unknown {
  const format = (f: string) => f.replace('IPAM_MAP_FORMAT_', '').toLowerCase()
  return JSON.parse(JSON.stringify(message), (key, value) =>
    key.startsWith('_') ? undefined : key === 'mapFormat' ? format(value) : value,
  )
}

const hostIpOf = async (p: Pipeline, name: string) =>
  (
    await until(
      () => p.controller.store.hosts.get(name),
      (h) => h?.status.phase === 'Ready' || h?.status.phase === 'Failed',
    )
  )?.status.hostAccessIPs?.hostIP

async function routerNetworks(p: Pipeline, group: string): Promise<string[]> {
  const out = await p.nbctl(
    'get',
    'Logical_Router_Port',
    topologyNames.routerSwitchPort(group),
    'networks',
  )
  return [...out.matchAll(/"([^"]+)"/g)].map((m) => m[1] ?? '').sort()
}

const groupReady = (p: Pipeline, version: number) =>
  until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g?.status.phase === 'Ready' && g.status.observedVersion === version,
  )

t.test('subnets, pools and reservations of a group over the API', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const call = api(p)
  const spec = {
    ...groupSpec('tenant-a'),
    pools: [{ name: 'vms', start: '10.10.10.100', end: '10.10.10.109' }],
    reservations: [{ start: '10.10.10.2', end: '10.10.10.9' }, { start: '10.10.10.11' }],
  }
  t.equal((await call('PUT', '/v1/resource-groups/group-a', spec)).status, 202)
  await groupReady(p, 1)

  const host = (n: number, extra: Record<string, unknown> = {}) =>
    hostSpec('group-a', 'dpu-1', n, { identifier: `pf${n}`, ...extra })
  t.equal((await call('PUT', '/v1/managed-resources/h1', host(1, { pool: 'vms' }))).status, 202)
  t.equal((await call('PUT', '/v1/managed-resources/h2', host(2))).status, 202)
  t.equal((await call('PUT', '/v1/managed-resources/h3', host(3))).status, 202)
  t.equal(await hostIpOf(p, 'h1'), '10.10.10.100', 'a host naming a pool gets its first address')
  const defaults = [await hostIpOf(p, 'h2'), await hostIpOf(p, 'h3')].sort()
  t.same(defaults, ['10.10.10.10', '10.10.10.12'], 'the others skip the gateway and reservations')

  t.test('a host asking for what its group does not allow: 400 naming the field', async (t) => {
    const reserved = await call(
      'PUT',
      '/v1/managed-resources/h4',
      host(4, { hostIP: '10.10.10.5' }),
    )
    t.equal(reserved.status, 400)
    t.match(reserved.json.error.issues, [{ path: 'hostIP', message: /reservations\.0/ }])
    const unknown = await call('PUT', '/v1/managed-resources/h4', host(4, { pool: 'db' }))
    t.equal(unknown.status, 400)
    t.match(unknown.json.error.issues, [{ path: 'pool', message: /has no pool db/ }])
    const bad = await call('PUT', '/v1/resource-groups/group-a', {
      ...spec,
      pools: [{ name: 'far', start: '10.99.0.1', end: '10.99.0.9' }],
    })
    t.equal(bad.status, 400)
    t.match(bad.json.error.issues, [{ path: 'pools.0', message: /inside one of the group's/ }])
  })

  t.test('a subnet added by re-PUT is routed in NB; addresses stay held', async (t) => {
    const more = { ...spec, extraSubnets: [{ cidr: '10.40.0.0/24', gateway: '10.40.0.1' }] }
    t.equal((await call('PUT', '/v1/resource-groups/group-a', more)).status, 202)
    await groupReady(p, 2)
    t.same(await routerNetworks(p, 'group-a'), ['10.10.10.1/24', '10.40.0.1/24'])
    t.same(
      (await p.controller.ipam.allocations('group-a')).map((a) => a.ip),
      ['10.10.10.10', '10.10.10.12', '10.10.10.100'],
    )
    t.equal(
      (await call('PUT', '/v1/managed-resources/h5', host(5, { hostIP: '10.40.0.9' }))).status,
      202,
    )
    t.equal(await hostIpOf(p, 'h5'), '10.40.0.9')

    const dropped = await call('PUT', '/v1/resource-groups/group-a', spec)
    t.equal(dropped.status, 409, 'removing the subnet h5 is in')
    t.match(dropped.json.error.issues, [
      {
        path: 'extraSubnets',
        message: '10.40.0.9 is held by h5 and lies in no subnet of the new spec',
      },
    ])
    const gateway = await call('PUT', '/v1/resource-groups/group-a', {
      ...spec,
      extraSubnets: [{ cidr: '10.40.0.0/24', gateway: '10.40.0.9' }],
    })
    t.equal(gateway.status, 409, "h5's address as the new gateway")
    t.match(gateway.json.error.issues, [{ path: 'extraSubnets.0.gateway', message: /held by h5/ }])
    t.equal((await p.controller.store.groups.get('group-a'))?.specVersion, 2, 'nothing stored')
  })

  t.test('GET …/ipam: the map, for the group tenant and operators only', async (t) => {
    const answer = await call('GET', '/v1/resource-groups/group-a/ipam')
    t.equal(answer.status, 200)
    const [primary, extra] = answer.json.subnets
    t.match(primary, { cidr: '10.10.10.0/24', size: '256', used: 3, mapFormat: 'address' })
    t.equal(primary.map.slice(0, 14), 'XXXXXXXXXX+X+.', 'network, gateway, reservations, hosts')
    t.equal(primary.map[100], '+', 'h1 in vms')
    t.match(primary.pools, [
      { name: 'default', start: '10.10.10.1', end: '10.10.10.99' },
      { name: 'default', start: '10.10.10.110', end: '10.10.10.254' },
      { name: 'vms', start: '10.10.10.100', end: '10.10.10.109', used: 1, free: 9 },
    ])
    t.match(extra, { cidr: '10.40.0.0/24', used: 1 })
    t.match(answer.json.allocations, [
      { owner: 'h2' },
      { owner: 'h3' },
      { owner: 'h1' },
      { owner: 'h5' },
    ])

    const tenant = await call('GET', '/v1/resource-groups/group-a/ipam', undefined, TENANT_A)
    t.equal(tenant.status, 200)
    t.same(tenant.json, answer.json)
    const other = await call('GET', '/v1/resource-groups/group-a/ipam', undefined, TENANT_B)
    t.equal(other.status, 404, "another tenant's group is not there")
    t.equal((await call('GET', '/v1/resource-groups/nope/ipam')).status, 404)
  })

  t.test('GetResourceGroupIpam: the same map over gRPC, scoped the same', async (t) => {
    const { call: rpc } = await startIngress(t, p)
    const http = (await call('GET', '/v1/resource-groups/group-a/ipam')).json
    const operator = await rpc('getResourceGroupIpam', { name: 'group-a' })
    t.equal(operator.error, undefined)
    t.same(asHttpJson(operator.res), http, "the HTTP view's fields and values")
    t.match(operator.res.subnets[0], {
      size: '256',
      used: 3,
      mapFormat: 'IPAM_MAP_FORMAT_ADDRESS',
    })

    const tenant = await rpc('getResourceGroupIpam', { name: 'group-a' }, TENANT_A)
    t.equal(tenant.error, undefined, 'the owning tenant sees it')
    t.same(tenant.res, operator.res)

    for (const [who, name, token] of [
      ['another tenant', 'group-a', TENANT_B],
      ['a missing group', 'nope', OPERATOR],
    ] as const) {
      const refused = await rpc('getResourceGroupIpam', { name }, token)
      t.equal(refused.error?.code, grpc.status.NOT_FOUND, `${who}: NOT_FOUND`)
      t.match(
        statusDetailsOf(refused.error?.metadata).errorInfo,
        { reason: 'NOT_FOUND', domain: 'hydrazine.dev' },
        `${who}: ErrorInfo`,
      )
    }
    const other = await rpc('getResourceGroupIpam', { name: 'group-a' }, TENANT_B)
    const missing = await rpc('getResourceGroupIpam', { name: 'nope' }, TENANT_B)
    t.equal(
      other.error?.details.replace('group-a', 'X'),
      missing.error?.details.replace('nope', 'X'),
      "another tenant's group reads exactly like a missing one",
    )
    t.equal(
      (await rpc('getResourceGroupIpam', { name: 'group-a' }, undefined)).error?.code,
      grpc.status.UNAUTHENTICATED,
    )
  })
})

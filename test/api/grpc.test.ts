import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { createHydrazineClient, type ObjectEvent } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import type { HydrazineClient } from '../../queues/producer.ts'
import type { Teardown } from '../helpers/stack.ts'
import {
  groupSpec,
  hostSpec,
  type Pipeline,
  refusalSnapshot,
  startPipeline,
  until,
} from '../pipeline/fixtures.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT_A = 'tenant-a-token-0123456789abcdef'
const TENANT_B = 'tenant-b-token-0123456789abcdef'

type Method =
  | 'applyResourceGroup'
  | 'getResourceGroup'
  | 'listResourceGroups'
  | 'deleteResourceGroup'
  | 'applyManagedResource'
  | 'getManagedResource'
  | 'listManagedResources'
  | 'deleteManagedResource'
  | 'registerPublicIp'
  | 'getPublicIp'
  | 'listPublicIps'
  | 'unregisterPublicIp'

interface Answer {
  // biome-ignore lint/suspicious/noExplicitAny: responses are inspected loosely in tests
  res?: any
  error?: grpc.ServiceError
}

async function startIngress(
  t: Teardown,
  p: Pipeline,
  watchLimits?: Parameters<typeof createGrpcServer>[0]['watchLimits'],
) {
  const ingress = createGrpcServer({
    client: p.client,
    tokens: { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT_A], 'tenant-b': [TENANT_B] } },
    ...(watchLimits ? { watchLimits } : {}),
  })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const client = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => client.close())

  const metadata = (token: string | undefined) => {
    const md = new grpc.Metadata()
    if (token !== undefined) md.set('authorization', `Bearer ${token}`)
    return md
  }

  /** One unary call as `token` (default the operator; `undefined`: none); never rejects. */
  const call = (method: Method, request: object, ...as: [token?: string | undefined]) =>
    new Promise<Answer>((resolve) => {
      const token = as.length > 0 ? as[0] : OPERATOR
      const fn = client[method].bind(client) as unknown as (
        req: object,
        md: grpc.Metadata,
        cb: (error: grpc.ServiceError | null, res?: unknown) => void,
      ) => void
      fn(request, metadata(token), (error, res) => resolve(error ? { error } : { res }))
    })

  /** A Watch stream collecting its events; `end()` cancels it. */
  const watch = (request: object, ...as: [token?: string | undefined]) => {
    const token = as.length > 0 ? as[0] : OPERATOR
    const events: ObjectEvent[] = []
    const stream = client.watch(request, metadata(token))
    const closed = new Promise<grpc.StatusObject | grpc.ServiceError>((resolve) => {
      stream.on('error', (e: grpc.ServiceError) => resolve(e))
      stream.on('status', (s: grpc.StatusObject) => resolve(s))
    })
    stream.on('data', (e: ObjectEvent) => events.push(e))
    const end = () => stream.cancel()
    t.teardown(end)
    return { events, closed, end }
  }

  return { call, watch, client }
}

const snapshot = refusalSnapshot

const json = (a: Answer) => JSON.parse(a.res?.objectJson ?? 'null')
const issuesOf = (a: Answer) => JSON.parse(String(a.error?.metadata.get('hz-issues')[0] ?? '[]'))

t.test('gRPC ingress against a running pipeline', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const { call, watch } = await startIngress(t, p)

  t.test('group: Watch sees it become Ready; an unchanged apply enqueues nothing', async (t) => {
    const w = watch({ kind: 'RESOURCE_GROUP', name: 'group-a' })
    const put = await call('applyResourceGroup', {
      name: 'group-a',
      specJson: JSON.stringify(groupSpec('tenant-a')),
    })
    t.equal(put.error, undefined)
    t.ok(put.res.jobId, 'a job was enqueued')
    t.match(json(put), { name: 'group-a', specVersion: 1 })
    const again = await call('applyResourceGroup', {
      name: 'group-a',
      specJson: JSON.stringify(groupSpec('tenant-a')),
    })
    t.equal(again.res.jobId, undefined, 'nothing enqueued for an unchanged spec')

    await until(
      async () => w.events.map((e) => JSON.parse(e.objectJson || 'null')?.status?.phase),
      (phases) => phases.includes('Ready'),
    )
    t.ok(
      w.events.every((e) => e.kind === 'RESOURCE_GROUP' && e.name === 'group-a'),
      'only the watched object',
    )
    t.match(JSON.parse(w.events.at(-1)?.objectJson ?? '{}'), {
      spec: groupSpec('tenant-a'),
      status: { phase: 'Ready', observedVersion: 1 },
    })
    t.match(json(await call('getResourceGroup', { name: 'group-a' })), {
      status: { phase: 'Ready' },
    })
  })

  t.test('host: Ready with the in-process agent, listed by group', async (t) => {
    const w = watch({ kind: 'MANAGED_RESOURCE' }, TENANT_A)
    const put = await call('applyManagedResource', {
      name: 'host-1',
      specJson: JSON.stringify(hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess' })),
    })
    t.equal(put.error, undefined)
    t.ok(put.res.jobId)
    await until(
      async () => w.events.map((e) => JSON.parse(e.objectJson || 'null')?.status?.phase),
      (phases) => phases.includes('Ready'),
    )
    t.match(json(await call('getManagedResource', { name: 'host-1' }, TENANT_A)), {
      status: { phase: 'Ready', configsSynced: true },
    })
    const listed = await call('listManagedResources', { resourceGroup: 'group-a' })
    t.same(
      listed.res.itemsJson.map((j: string) => JSON.parse(j).name),
      ['host-1'],
    )
  })

  t.test('a second tenant and its group', async (t) => {
    const put = await call(
      'applyResourceGroup',
      {
        name: 'group-b',
        specJson: JSON.stringify(groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1')),
      },
      TENANT_B,
    )
    t.equal(put.error, undefined)
  })

  t.test('auth matrix', async (t) => {
    const S = grpc.status
    const cases: [string, Method, object, string | undefined, grpc.status][] = [
      ['operator reads any group', 'getResourceGroup', { name: 'group-a' }, OPERATOR, S.OK],
      ['tenant reads its own group', 'getResourceGroup', { name: 'group-a' }, TENANT_A, S.OK],
      [
        "tenant reads another's group",
        'getResourceGroup',
        { name: 'group-a' },
        TENANT_B,
        S.NOT_FOUND,
      ],
      ['no token', 'getResourceGroup', { name: 'group-a' }, undefined, S.UNAUTHENTICATED],
      [
        'unknown token',
        'getResourceGroup',
        { name: 'group-a' },
        'not-a-token-0123456789',
        S.UNAUTHENTICATED,
      ],
      ['tenant reads its own host', 'getManagedResource', { name: 'host-1' }, TENANT_A, S.OK],
      [
        "tenant reads another's host",
        'getManagedResource',
        { name: 'host-1' },
        TENANT_B,
        S.NOT_FOUND,
      ],
      ['tenant lists public IPs', 'listPublicIps', {}, TENANT_A, S.PERMISSION_DENIED],
      ['operator lists public IPs', 'listPublicIps', {}, OPERATOR, S.OK],
      ['no token lists public IPs', 'listPublicIps', {}, undefined, S.UNAUTHENTICATED],
    ]
    for (const [name, method, request, token, status] of cases) {
      const answer = await call(method, request, token)
      t.equal(answer.error?.code ?? S.OK, status, name)
    }
    const names = async (token: string, tenant?: string) =>
      (
        await call('listResourceGroups', tenant === undefined ? {} : { tenant }, token)
      ).res.itemsJson.map((j: string) => JSON.parse(j).name)
    t.same(await names(OPERATOR), ['group-a', 'group-b'], 'operator lists every group')
    t.same(await names(OPERATOR, 'tenant-b'), ['group-b'], 'operator filters by tenant')
    t.same(await names(TENANT_A), ['group-a'], 'a tenant lists only its own')
    t.same(await names(TENANT_A, 'tenant-b'), [], "a tenant cannot list another's")
    const hosts = await call('listManagedResources', {}, TENANT_B)
    t.same(hosts.res.itemsJson, [], "a tenant does not list another's hosts")

    const unauthenticated = watch({}, undefined)
    t.equal((await unauthenticated.closed).code, S.UNAUTHENTICATED, 'Watch without a token')
    const other = watch({}, TENANT_B)
    await until(
      async () => other.events.length,
      (n) => n > 0,
    )
    await new Promise((r) => setTimeout(r, 300))
    t.same(
      other.events.map((e) => e.name),
      ['group-b'],
      "a tenant's Watch shows only its own objects",
    )
  })

  t.test('public IPs: register, read, list, refuse removal while allocated', async (t) => {
    const reg = await call('registerPublicIp', { ip: '203.0.113.10' })
    t.match(reg.res, { ip: '203.0.113.10', allocated: false })
    t.equal((await call('registerPublicIp', { ip: '203.0.113.11' })).error, undefined)
    t.match((await call('getPublicIp', { ip: '203.0.113.10' })).res, { ip: '203.0.113.10' })
    const allocated = await p.controller.ipam.allocatePublicIp('host-x')
    const before = await snapshot(p)
    const del = await call('unregisterPublicIp', { ip: allocated })
    t.equal(del.error?.code, grpc.status.FAILED_PRECONDITION, 'allocated: refused')
    t.same(await snapshot(p), before, 'nothing changed')
    const free = allocated === '203.0.113.10' ? '203.0.113.11' : '203.0.113.10'
    t.equal((await call('unregisterPublicIp', { ip: free })).error, undefined)
    t.same(
      (await call('listPublicIps', {})).res.items.map((i: { ip: string }) => i.ip),
      [allocated],
    )
  })

  t.test('refused requests answer with a status and change nothing', async (t) => {
    const S = grpc.status
    const spec = (o: unknown) => JSON.stringify(o)
    const cases: [string, Method, object, string | undefined, grpc.status, string | undefined][] = [
      [
        'invalid group names every bad field',
        'applyResourceGroup',
        {
          name: 'group-c',
          specJson: spec({
            tenantId: 'Bad_Tenant',
            network: { cidr: '10.0.0.1/24', gateway: 'x' },
          }),
        },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'invalid name',
        'applyResourceGroup',
        { name: 'Bad_Name', specJson: spec(groupSpec()) },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'spec is an array',
        'applyResourceGroup',
        { name: 'group-c', specJson: '[1]' },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'spec is not JSON',
        'applyResourceGroup',
        { name: 'group-c', specJson: '{nope' },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'spec is empty',
        'applyManagedResource',
        { name: 'host-c', specJson: '' },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'spec over 64 KiB',
        'applyResourceGroup',
        { name: 'group-c', specJson: spec({ ...groupSpec(), pad: 'x'.repeat(70 * 1024) }) },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'no token',
        'applyResourceGroup',
        { name: 'group-c', specJson: spec(groupSpec()) },
        undefined,
        S.UNAUTHENTICATED,
        undefined,
      ],
      [
        'tenant creates a group for another tenant',
        'applyResourceGroup',
        { name: 'group-c', specJson: spec(groupSpec('tenant-b')) },
        TENANT_A,
        S.PERMISSION_DENIED,
        'FORBIDDEN',
      ],
      [
        "tenant overwrites another tenant's group",
        'applyResourceGroup',
        { name: 'group-b', specJson: spec(groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1')) },
        TENANT_A,
        S.FAILED_PRECONDITION,
        'NAME_TAKEN',
      ],
      [
        "tenant deletes another tenant's group",
        'deleteResourceGroup',
        { name: 'group-b' },
        TENANT_A,
        S.NOT_FOUND,
        'NOT_FOUND',
      ],
      [
        "tenant attaches a host to another tenant's group",
        'applyManagedResource',
        { name: 'host-9', specJson: spec(hostSpec('group-b', 'dpu-3', 9)) },
        TENANT_A,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'tenant registers a public IP',
        'registerPublicIp',
        { ip: '203.0.113.12' },
        TENANT_A,
        S.PERMISSION_DENIED,
        'FORBIDDEN',
      ],
      [
        'bad public IP',
        'registerPublicIp',
        { ip: '203.0.113.300' },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      ['missing group', 'getResourceGroup', { name: 'nope' }, OPERATOR, S.NOT_FOUND, 'NOT_FOUND'],
      [
        'delete a missing host',
        'deleteManagedResource',
        { name: 'nope' },
        OPERATOR,
        S.NOT_FOUND,
        'NOT_FOUND',
      ],
      [
        'missing public IP',
        'getPublicIp',
        { ip: '203.0.113.99' },
        OPERATOR,
        S.NOT_FOUND,
        'NOT_FOUND',
      ],
      [
        "change a group's network",
        'applyResourceGroup',
        { name: 'group-a', specJson: spec(groupSpec('tenant-a', '10.11.0.0/24', '10.11.0.1')) },
        OPERATOR,
        S.FAILED_PRECONDITION,
        'CONFLICT',
      ],
      [
        'a NAT IP another host holds',
        'applyManagedResource',
        {
          name: 'host-2',
          specJson: spec({
            ...hostSpec('group-a', 'dpu-2', 2, { hostAccess: 'FabricAccess' }),
            dpu: { id: 'dpu-2', ips: ['172.18.0.12', '172.18.0.111'] },
          }),
        },
        OPERATOR,
        S.FAILED_PRECONDITION,
        'CONFLICT',
      ],
    ]
    for (const [name, method, request, token, status, code] of cases) {
      const before = await snapshot(p)
      const answer = await call(method, request, token)
      t.equal(answer.error?.code, status, `${name}: status`)
      t.equal(answer.error?.metadata.get('hz-code')[0], code, `${name}: hz-code`)
      t.ok(answer.error?.details, `${name}: a message`)
      t.same(await snapshot(p), before, `${name}: nothing changed`)
    }

    const invalid = await call('applyResourceGroup', {
      name: 'group-c',
      specJson: spec({ tenantId: 'Bad_Tenant', network: { cidr: '10.0.0.1/24', gateway: 'x' } }),
    })
    const paths = ['network.cidr', 'network.gateway', 'tenantId']
    t.same(
      [...new Set(issuesOf(invalid).map((i: { path: string }) => i.path))].sort(),
      paths,
      'hz-issues names every invalid field',
    )
    for (const path of paths) t.match(invalid.error?.details, path, `the message names ${path}`)
  })

  t.test('an unexpected failure is INTERNAL without details', async (t) => {
    const logged: unknown[] = []
    const broken = createGrpcServer({
      // The real client, except that reading a group fails as a lost Redis would.
      client: Object.assign(Object.create(p.client) as HydrazineClient, {
        getGroup: async () => {
          throw new Error('redis exploded at 10.0.0.7:6379')
        },
      }),
      tokens: { operator: [OPERATOR], tenants: {} },
      logError: (e) => logged.push(e),
    })
    const port = await broken.bind('127.0.0.1:0')
    t.teardown(() => broken.close())
    const client = createHydrazineClient(`127.0.0.1:${port}`)
    t.teardown(() => client.close())
    const md = new grpc.Metadata()
    md.set('authorization', `Bearer ${OPERATOR}`)
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.getResourceGroup({ name: 'group-a' }, md, (e) => resolve(e)),
    )
    t.equal(error?.code, grpc.status.INTERNAL)
    t.equal(error?.details, 'internal error', 'no internals in the answer')
    t.equal(logged.length, 1, 'the cause was logged')
  })

  t.test('delete: Watch reports the host and then the group deleted', async (t) => {
    const w = watch({})
    await until(
      async () => w.events.length,
      (n) => n >= 3,
    )
    const host = await call('deleteManagedResource', { name: 'host-1' }, TENANT_A)
    t.equal(host.error, undefined)
    t.ok(json(host).deletion, 'deletion recorded')
    t.ok(host.res.jobId)
    await until(
      async () => w.events.some((e) => e.name === 'host-1' && e.deleted),
      (deleted) => deleted,
    )
    const group = await call('deleteResourceGroup', { name: 'group-a', force: true })
    t.equal(json(group).deletion.force, true)
    await until(
      async () => w.events.some((e) => e.name === 'group-a' && e.deleted),
      (deleted) => deleted,
    )
    t.equal(
      (await call('getResourceGroup', { name: 'group-a' })).error?.code,
      grpc.status.NOT_FOUND,
      'the group is gone',
    )
    w.end()
  })
})

t.test('Watch streams are bounded per token and in all', async (t) => {
  const p = await startPipeline(t)
  const { watch } = await startIngress(t, p, { perPrincipal: 2, total: 3 })
  const a1 = watch({}, TENANT_A)
  const a2 = watch({}, TENANT_A)
  const a3 = watch({}, TENANT_A)
  t.match(await a3.closed, { code: grpc.status.RESOURCE_EXHAUSTED, details: /2 for one token/ })
  const b1 = watch({}, TENANT_B)
  const b2 = watch({}, TENANT_B)
  t.match(await b2.closed, { code: grpc.status.RESOURCE_EXHAUSTED, details: /3 in all/ })
  // A closed stream frees its place.
  a1.end()
  await a1.closed
  await new Promise((r) => setTimeout(r, 200))
  const b3 = watch({}, TENANT_B)
  await p.client.applyGroup('group-w', groupSpec('tenant-b'))
  await until(
    async () => b3.events.length,
    (n) => n > 0,
  )
  t.pass('a new stream opens once one closed')
  for (const w of [a2, b1, b3]) w.end()
})

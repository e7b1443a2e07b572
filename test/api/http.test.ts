import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'
import { refusalSnapshot } from '../pipeline/scenarios.ts'

interface Call {
  token?: string | undefined
  body?: unknown
  /** A raw body sent as is (overrides `body`). */
  raw?: string
  contentType?: string
}

function api(p: Pipeline) {
  const app = createApp({
    readiness: { redis: async () => (await p.controller.redis.ping()) === 'PONG' },
    v1: {
      client: p.client,
      tokens: TEST_TOKENS,
    },
  })
  return async (method: string, path: string, call: Call = {}) => {
    const headers: Record<string, string> = {}
    const token = 'token' in call ? call.token : OPERATOR
    if (token !== undefined) headers.authorization = `Bearer ${token}`
    const body = call.raw ?? (call.body === undefined ? undefined : JSON.stringify(call.body))
    if (body !== undefined) headers['content-type'] = call.contentType ?? 'application/json'
    const res = await app.request(path, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    })
    const text = await res.text()
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
    const json: any = text ? JSON.parse(text) : undefined
    return { status: res.status, json }
  }
}

const snapshot = refusalSnapshot

t.test('HTTP API against a running pipeline', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const call = api(p)

  t.test('probes need no token', async (t) => {
    t.equal((await call('GET', '/healthz', { token: undefined })).status, 200)
    t.equal((await call('GET', '/readyz', { token: undefined })).status, 200)
    const down = createApp({ readiness: { ovnNb: async () => false, redis: async () => true } })
    const res = await down.request('/readyz')
    t.equal(res.status, 503, 'a failing probe makes /readyz 503')
    t.same(await res.json(), {
      status: 'not ready',
      checks: { ovnNb: 'unavailable', redis: 'ok' },
    })
  })

  t.test('group: PUT 202, unchanged PUT 200 without a job, GET shows Ready', async (t) => {
    const put = await call('PUT', '/v1/resource-groups/group-a', { body: groupSpec('tenant-a') })
    t.equal(put.status, 202)
    t.match(put.json, { object: { name: 'group-a', specVersion: 1 }, jobId: String })
    const again = await call('PUT', '/v1/resource-groups/group-a', { body: groupSpec('tenant-a') })
    t.equal(again.status, 200, 'unchanged spec')
    t.equal(again.json.jobId, undefined, 'nothing enqueued')
    t.equal(again.json.object.specVersion, 1)
    const ready = await until(
      async () => (await call('GET', '/v1/resource-groups/group-a')).json,
      (g) => g?.status?.phase === 'Ready',
    )
    t.match(ready, {
      name: 'group-a',
      spec: groupSpec('tenant-a'),
      status: { phase: 'Ready', observedVersion: 1, conditions: Array },
    })
  })

  t.test('host: PUT 202, Ready with the agent, listed by group', async (t) => {
    const put = await call('PUT', '/v1/managed-resources/host-1', {
      body: hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess' }),
    })
    t.equal(put.status, 202)
    t.ok(put.json.jobId)
    const ready = await until(
      async () => (await call('GET', '/v1/managed-resources/host-1')).json,
      (h) => h?.status?.phase === 'Ready',
    )
    t.match(ready, {
      status: { phase: 'Ready', configsSynced: true, observedVersion: 1 },
    })
    const list = await call('GET', '/v1/managed-resources?resourceGroup=group-a')
    t.same(
      list.json.items.map((h: { name: string }) => h.name),
      ['host-1'],
    )
  })

  t.test('a second tenant and its group', async (t) => {
    const put = await call('PUT', '/v1/resource-groups/group-b', {
      token: TENANT_B,
      body: groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1'),
    })
    t.equal(put.status, 202)
  })

  t.test('auth matrix', async (t) => {
    const cases: [string, string, string | undefined, number][] = [
      ['operator reads any group', '/v1/resource-groups/group-a', OPERATOR, 200],
      ['tenant reads its own group', '/v1/resource-groups/group-a', TENANT_A, 200],
      ["tenant reads another's group", '/v1/resource-groups/group-a', TENANT_B, 404],
      ['no token', '/v1/resource-groups/group-a', undefined, 401],
      ['unknown token', '/v1/resource-groups/group-a', 'not-a-token-0123456789', 401],
      ['tenant reads its own host', '/v1/managed-resources/host-1', TENANT_A, 200],
      ["tenant reads another's host", '/v1/managed-resources/host-1', TENANT_B, 404],
      ['tenant lists public IPs', '/v1/public-ips', TENANT_A, 403],
      ['tenant lists the DPUs assigned to it', '/v1/dpus', TENANT_A, 200],
      ['tenant reads a DPU not assigned to it', '/v1/dpus/dpu-x', TENANT_A, 404],
      ['operator lists DPUs', '/v1/dpus', OPERATOR, 200],
      ['no token for DPUs', '/v1/dpus', undefined, 401],
    ]
    for (const [name, path, token, status] of cases) {
      const res = await call('GET', path, { token })
      t.equal(res.status, status, name)
      if (status >= 400) t.type(res.json?.error?.code, 'string', `${name}: error body`)
    }

    const names = async (token: string, query = '') =>
      (await call('GET', `/v1/resource-groups${query}`, { token })).json.items.map(
        (g: { name: string }) => g.name,
      )
    t.same(await names(OPERATOR), ['group-a', 'group-b'], 'operator lists every group')
    t.same(await names(OPERATOR, '?tenant=tenant-b'), ['group-b'], 'operator filters by tenant')
    t.same(await names(TENANT_A), ['group-a'], 'a tenant lists only its own')
    t.same(await names(TENANT_A, '?tenant=tenant-b'), [], "a tenant cannot list another's")
    const hosts = await call('GET', '/v1/managed-resources', { token: TENANT_B })
    t.same(hosts.json.items, [], "a tenant does not list another's hosts")
  })

  t.test('public IPs: register, read, list, refuse removal while allocated', async (t) => {
    const put = await call('PUT', '/v1/public-ips/203.0.113.10')
    t.equal(put.status, 200)
    t.same(put.json.object, { ip: '203.0.113.10', allocated: false })
    t.equal((await call('PUT', '/v1/public-ips/203.0.113.11')).status, 200)
    t.same((await call('GET', '/v1/public-ips/203.0.113.10')).json, {
      ip: '203.0.113.10',
      allocated: false,
    })
    t.equal((await call('GET', '/v1/public-ips/203.0.113.99')).status, 404)
    t.equal((await call('PUT', '/v1/public-ips/203.0.113.12', { token: TENANT_A })).status, 403)
    const allocated = await p.controller.ipam.allocatePublicIp('host-x')
    const before = await snapshot(p)
    const del = await call('DELETE', `/v1/public-ips/${allocated}`)
    t.equal(del.status, 409)
    t.equal(del.json.error.code, 'CONFLICT')
    t.same(await snapshot(p), before, 'nothing changed')
    const free = allocated === '203.0.113.10' ? '203.0.113.11' : '203.0.113.10'
    t.equal((await call('DELETE', `/v1/public-ips/${free}`)).status, 204)
    t.same(
      (await call('GET', '/v1/public-ips')).json.items.map((i: { ip: string }) => i.ip),
      [allocated],
    )
  })

  t.test('IPv6 public IPs: a pool of their own, any spelling the same address', async (t) => {
    const put = await call('PUT', '/v1/public-ips/2001:db8:ff::5')
    t.equal(put.status, 200)
    t.same(put.json.object, { ip: '2001:db8:ff::5', allocated: false })
    const again = await call('PUT', '/v1/public-ips/2001:DB8:FF:0::5')
    t.equal(again.status, 200, 'another spelling registers nothing new')
    t.same(again.json.object, { ip: '2001:db8:ff::5', allocated: false }, 'answered canonical')
    t.same((await call('GET', '/v1/public-ips/2001:DB8:FF:0::5')).json, {
      ip: '2001:db8:ff::5',
      allocated: false,
    })
    const listed = (await call('GET', '/v1/public-ips')).json.items.map((i: { ip: string }) => i.ip)
    t.same(listed.slice(-1), ['2001:db8:ff::5'], 'listed once, after the IPv4 addresses')
    t.equal(listed.length, 2, 'beside the IPv4 one left')
    for (const bad of ['2001:db8::g', '1:2:3:4:5:6:7:8:9', '127.0.0.1', 'fe80::1']) {
      const refused = await call('PUT', `/v1/public-ips/${bad}`)
      t.equal(refused.status, 400, `${bad}: refused`)
      t.same(
        refused.json.error.issues.map((i: { path: string }) => i.path),
        ['ip'],
        `${bad}: naming ip`,
      )
    }
  })

  t.test('DPUs: natIp6 is stored canonical, validated, claimed, fixed while in use', async (t) => {
    const spec = { fabricIps: ['172.18.0.71', '172.18.0.171'], natIp6: 'fd00:fab::105' }
    const put = await call('PUT', '/v1/dpus/dpu-v6', { body: spec })
    t.equal(put.status, 201)
    t.match(put.json.object, { id: 'dpu-v6', spec: { natIp6: 'fd00:fab::105' } })
    t.match((await call('GET', '/v1/dpus/dpu-v6')).json.spec, { natIp6: 'fd00:fab::105' })
    const respelt = await call('PUT', '/v1/dpus/dpu-v6', {
      body: { ...spec, natIp6: 'FD00:FAB:0::105' },
    })
    t.equal(respelt.status, 200, 'another spelling is the same address: unchanged')
    t.equal(respelt.json.object.spec.natIp6, 'fd00:fab::105')
    for (const natIp6 of ['10.0.0.1', 'nope']) {
      const refused = await call('PUT', '/v1/dpus/dpu-v6', { body: { ...spec, natIp6 } })
      t.equal(refused.status, 400, `${natIp6}: refused`)
      t.equal(refused.json.error.code, 'INVALID')
      t.same(
        refused.json.error.issues.map((i: { path: string }) => i.path),
        ['natIp6'],
        `${natIp6}: naming natIp6`,
      )
    }
    const taken = await call('PUT', '/v1/dpus/dpu-v7', {
      body: { fabricIps: ['172.18.0.72'], natIp6: 'fd00:fab:0:0::105' },
    })
    t.equal(taken.status, 409, "another DPU's natIp6, in any spelling: refused")
    t.equal((await call('GET', '/v1/dpus/dpu-v7')).status, 404, 'and not stored')
    t.match((await call('GET', '/v1/dpus/dpu-v6')).json.spec, { natIp6: 'fd00:fab::105' })

    const serving = (await call('GET', '/v1/dpus/dpu-1')).json
    t.same(serving.hosts, ['host-1'])
    const moved = await call('PUT', '/v1/dpus/dpu-1', {
      body: { ...serving.spec, natIp6: 'fd00:fab::106' },
    })
    t.equal(moved.status, 409, 'no natIp6 added under a DPU serving hosts')
    t.equal((await call('GET', '/v1/dpus/dpu-1')).json.spec.natIp6, undefined)

    const host = (natIp6: string) =>
      call('PUT', '/v1/managed-resources/host-v6?dryRun=true', {
        body: {
          resourceGroup: 'group-a',
          hostMAC: '52:54:00:00:00:66',
          dpu: { id: 'dpu-v6', ips: spec.fabricIps, natIp6 },
        },
      })
    const agreeing = await host('FD00:FAB::105')
    t.ok(agreeing.status < 300, `a host request giving the inventory's natIp6: ${agreeing.status}`)
    const disagreeing = await host('fd00:fab::999')
    t.equal(disagreeing.status, 400, 'one disagreeing with the inventory: refused')
    t.match(JSON.stringify(disagreeing.json), /dpu\.natIp6/, 'naming dpu.natIp6')
  })

  t.test('refused requests answer with an error and change nothing', async (t) => {
    const big = { ...groupSpec('tenant-a'), pad: 'x'.repeat(70 * 1024) }
    const cases: [string, string, string, Call, number, string][] = [
      [
        'invalid group names every bad field',
        'PUT',
        '/v1/resource-groups/group-c',
        { body: { tenantId: 'Bad_Tenant', network: { cidr: '10.0.0.1/24', gateway: 'x' } } },
        400,
        'INVALID',
      ],
      [
        'invalid name',
        'PUT',
        '/v1/resource-groups/Bad_Name',
        { body: groupSpec() },
        400,
        'INVALID',
      ],
      ['body is an array', 'PUT', '/v1/resource-groups/group-c', { body: [1] }, 400, 'INVALID'],
      ['body is null', 'PUT', '/v1/resource-groups/group-c', { raw: 'null' }, 400, 'INVALID'],
      ['body is not JSON', 'PUT', '/v1/resource-groups/group-c', { raw: '{nope' }, 400, 'INVALID'],
      [
        'wrong content type',
        'PUT',
        '/v1/resource-groups/group-c',
        { raw: JSON.stringify(groupSpec()), contentType: 'text/plain' },
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      ],
      ['body over 64 KiB', 'PUT', '/v1/resource-groups/group-c', { body: big }, 413, 'TOO_LARGE'],
      [
        'no token',
        'PUT',
        '/v1/resource-groups/group-c',
        { token: undefined, body: groupSpec() },
        401,
        'UNAUTHENTICATED',
      ],
      [
        'tenant creates a group for another tenant',
        'PUT',
        '/v1/resource-groups/group-c',
        { token: TENANT_A, body: groupSpec('tenant-b') },
        403,
        'FORBIDDEN',
      ],
      [
        // Names are global: the answer says only that the name is taken, nothing more.
        "tenant overwrites another tenant's group",
        'PUT',
        '/v1/resource-groups/group-b',
        { token: TENANT_A, body: groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1') },
        409,
        'NAME_TAKEN',
      ],
      [
        "tenant deletes another tenant's group",
        'DELETE',
        '/v1/resource-groups/group-b',
        { token: TENANT_A },
        404,
        'NOT_FOUND',
      ],
      [
        "tenant attaches a host to another tenant's group",
        'PUT',
        '/v1/managed-resources/host-9',
        { token: TENANT_A, body: hostSpec('group-b', 'dpu-3', 9) },
        400,
        'INVALID',
      ],
      ['missing group', 'GET', '/v1/resource-groups/nope', {}, 404, 'NOT_FOUND'],
      ['delete a missing host', 'DELETE', '/v1/managed-resources/nope', {}, 404, 'NOT_FOUND'],
      [
        "change a group's network",
        'PUT',
        '/v1/resource-groups/group-a',
        { body: groupSpec('tenant-a', '10.11.0.0/24', '10.11.0.1') },
        409,
        'CONFLICT',
      ],
      [
        'move a host to another DPU',
        'PUT',
        '/v1/managed-resources/host-1',
        { body: hostSpec('group-a', 'dpu-9', 1, { hostAccess: 'FabricAccess' }) },
        409,
        'CONFLICT',
      ],
      [
        'a NAT IP another host holds',
        'PUT',
        '/v1/managed-resources/host-2',
        {
          body: {
            ...hostSpec('group-a', 'dpu-2', 2, { hostAccess: 'FabricAccess' }),
            dpu: { id: 'dpu-2', ips: ['172.18.0.12', '172.18.0.111'] },
          },
        },
        409,
        'CONFLICT',
      ],
    ]
    for (const [name, method, path, req, status, code] of cases) {
      const before = await snapshot(p)
      const res = await call(method, path, req)
      t.equal(res.status, status, `${name}: status`)
      t.equal(res.json?.error?.code, code, `${name}: code`)
      t.type(res.json?.error?.message, 'string', `${name}: message`)
      t.same(await snapshot(p), before, `${name}: nothing changed`)
    }

    const invalid = await call('PUT', '/v1/resource-groups/group-c', {
      body: { tenantId: 'Bad_Tenant', network: { cidr: '10.0.0.1/24', gateway: 'x' } },
    })
    t.same(
      [...new Set(invalid.json.error.issues.map((i: { path: string }) => i.path))].sort(),
      ['network.cidr', 'network.gateway', 'tenantId'],
      'every invalid field is named',
    )
  })

  t.test('delete: host then group', async (t) => {
    const host = await call('DELETE', '/v1/managed-resources/host-1', { token: TENANT_A })
    t.equal(host.status, 202)
    t.ok(host.json.object.deletion, 'deletion recorded')
    t.ok(host.json.jobId)
    await until(
      async () => (await call('GET', '/v1/managed-resources/host-1')).status,
      (s) => s === 404,
    )
    const group = await call('DELETE', '/v1/resource-groups/group-a?force=true')
    t.equal(group.status, 202)
    t.equal(group.json.object.deletion.force, true)
    const gone = await until(
      async () => (await call('GET', '/v1/resource-groups/group-a')).status,
      (s) => s === 404,
    )
    t.equal(gone, 404, 'the group is gone')
  })
})

t.test('GET /v1/openapi.json names every route, and each one exists', async (t) => {
  const app = createApp({
    readiness: {},
    v1: { client: {} as never, tokens: { operator: [OPERATOR], tenants: {} } },
    events: { secret: 'x'.repeat(32), client: {} as never },
  })
  const res = await app.request('/v1/openapi.json')
  t.equal(res.status, 200, 'served without a token')
  const doc = (await res.json()) as {
    openapi: string
    paths: Record<string, Record<string, unknown>>
  }
  t.equal(doc.openapi, '3.1.0')
  const routeMissing = async (r: Response) =>
    r.status === 404 &&
    ((await r.json()) as { error: { message: string } }).error.message === 'no such route'
  t.ok(
    await routeMissing(
      await app.request('/v1/nothing-here', { headers: { authorization: `Bearer ${OPERATOR}` } }),
    ),
    'an undescribed route is missing',
  )
  const methods = ['get', 'put', 'post', 'delete']
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item).filter((m) => methods.includes(m))) {
      const concrete = path.replace('{name}', 'x').replace('{ip}', '192.0.2.1')
      // With stub deps a described route fails inside its handler (500) or refuses the
      // input; only an undescribed one answers "no such route".
      const answer = await app.request(concrete, {
        method: method.toUpperCase(),
        headers: { authorization: `Bearer ${OPERATOR}` },
      })
      t.not(await routeMissing(answer), true, `${method.toUpperCase()} ${path} exists`)
    }
  }
})

/**
 * Every list is paged, over HTTP (`?limit=`, `?continue=` → `{items, continue?}`) and gRPC
 * (`page_size`, `page_token` → `next_page_token`), on a real Redis (`contract.ts`): paging
 * shows every visible item exactly once, in order, keeps a tenant to its own objects
 * whatever token it sends, stays correct while objects are added, and refuses a bad
 * limit or token naming the parameter.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { createApp } from '../../api/http/app.ts'
import type { HydrazineClient } from '../../app/index.ts'
import { groupSpec, hostSpec } from '../helpers/requests.ts'
import type { Teardown } from '../helpers/stack.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import { startContract } from './contract.ts'

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
type Json = any

function http(p: { client: HydrazineClient }) {
  const app = createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } })
  return async (path: string, token = OPERATOR) => {
    const res = await app.request(path, { headers: { authorization: `Bearer ${token}` } })
    return { status: res.status, json: (await res.json()) as Json }
  }
}

type ListMethod = 'listResourceGroups' | 'listManagedResources' | 'listPublicIps' | 'listDpus'

/** The field of each List response that holds its items. */
const LIST_FIELD: Record<ListMethod, string> = {
  listResourceGroups: 'resourceGroups',
  listManagedResources: 'managedResources',
  listPublicIps: 'publicIps',
  listDpus: 'dpus',
}

async function grpcLists(t: Teardown, p: { client: HydrazineClient }) {
  const ingress = createGrpcServer({ client: p.client, tokens: TEST_TOKENS })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const client = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => client.close())
  return (method: ListMethod, request: object, token = OPERATOR) =>
    new Promise<{ res?: Json; error?: grpc.ServiceError }>((resolve) => {
      const md = new grpc.Metadata()
      md.set('authorization', `Bearer ${token}`)
      const fn = client[method].bind(client) as unknown as (
        req: object,
        md: grpc.Metadata,
        cb: (error: grpc.ServiceError | null, res?: unknown) => void,
      ) => void
      fn(request, md, (error, res) => resolve(error ? { error } : { res }))
    })
}

/** Pages an HTTP list through with `limit`: each page's keys, and the pages' count. */
async function httpPages(
  get: ReturnType<typeof http>,
  path: string,
  limit: number,
  key: (item: Json) => string,
  token = OPERATOR,
): Promise<string[][]> {
  const pages: string[][] = []
  let next: string | undefined
  do {
    const sep = path.includes('?') ? '&' : '?'
    const query = `${sep}limit=${limit}${next ? `&continue=${next}` : ''}`
    const { status, json } = await get(`${path}${query}`, token)
    if (status !== 200) throw new Error(`${path}: ${status} ${JSON.stringify(json)}`)
    pages.push(json.items.map(key))
    next = json.continue
  } while (next !== undefined && pages.length < 50)
  return pages
}

/** Pages a gRPC list through with `pageSize`. */
async function grpcPages(
  call: Awaited<ReturnType<typeof grpcLists>>,
  method: ListMethod,
  request: object,
  pageSize: number,
  key: (item: Json) => string,
  token = OPERATOR,
): Promise<string[][]> {
  const pages: string[][] = []
  let pageToken = ''
  do {
    const { res, error } = await call(method, { ...request, pageSize, pageToken }, token)
    if (error) throw error
    const items = res[LIST_FIELD[method]] as Json[]
    pages.push(items.map(key))
    pageToken = res.nextPageToken
  } while (pageToken !== '' && pages.length < 50)
  return pages
}

const byName = (item: Json) => item.name as string
const sizes = (pages: string[][]) => pages.map((p) => p.length)

t.test('lists are paged over HTTP and gRPC', async (t) => {
  const p = await startContract(t)
  const get = http(p)
  const call = await grpcLists(t, p)

  // tenant-a: 7 groups, 4 hosts; tenant-b: 2 groups, 2 hosts; one DPU per host.
  const groupsA = [1, 2, 3, 4, 5, 6, 7].map((n) => `group-a${n}`)
  const groupsB = ['group-b1', 'group-b2']
  for (const [i, name] of groupsA.entries()) {
    await p.client.applyGroup(name, groupSpec('tenant-a', `10.1.${i}.0/24`, `10.1.${i}.1`))
  }
  for (const [i, name] of groupsB.entries()) {
    await p.client.applyGroup(name, groupSpec('tenant-b', `10.2.${i}.0/24`, `10.2.${i}.1`))
  }
  const hostsA = ['host-a1', 'host-a2', 'host-a3', 'host-a4']
  const hostsB = ['host-b1', 'host-b2']
  const hostGroup = (h: string) =>
    h.startsWith('host-a') ? (h < 'host-a3' ? 'group-a1' : 'group-a2') : 'group-b1'
  for (const [i, name] of [...hostsA, ...hostsB].entries()) {
    await p.client.applyHost(name, hostSpec(hostGroup(name), `dpu-${i + 1}`, i + 1))
  }
  const all = [...groupsA, ...groupsB]

  t.test('HTTP: every group exactly once, in order, 3 at a time', async (t) => {
    const operator = await httpPages(get, '/v1/resource-groups', 3, byName)
    t.same(sizes(operator), [3, 3, 3], 'a full last page has no continue')
    t.same(operator.flat(), all)
    const a = await httpPages(get, '/v1/resource-groups', 3, byName, TENANT_A)
    t.same(sizes(a), [3, 3, 1])
    t.same(a.flat(), groupsA, "tenant-a pages only its own, never tenant-b's")
    const b = await httpPages(get, '/v1/resource-groups', 3, byName, TENANT_B)
    t.same(b, [groupsB], 'one page, no continue')
    const filtered = await httpPages(get, '/v1/resource-groups?tenant=tenant-b', 1, byName)
    t.same(filtered, [['group-b1'], ['group-b2']], 'the tenant filter is kept across pages')
    const unpaged = await get('/v1/resource-groups')
    t.same(unpaged.json.items.map(byName), all, 'no limit: the default page holds them all')
    t.equal(unpaged.json.continue, undefined)
  })

  t.test('HTTP: hosts, DPUs and public IPs page the same way', async (t) => {
    const hosts = await httpPages(get, '/v1/managed-resources', 4, byName)
    t.same(sizes(hosts), [4, 2])
    t.same(hosts.flat(), [...hostsA, ...hostsB])
    const a = await httpPages(get, '/v1/managed-resources', 3, byName, TENANT_A)
    t.same(a, [hostsA.slice(0, 3), hostsA.slice(3)], "a tenant's hosts only")
    t.same(
      await httpPages(get, '/v1/managed-resources?resourceGroup=group-a1', 1, byName, TENANT_A),
      [['host-a1'], ['host-a2']],
      'one group, a page at a time',
    )
    t.same(
      await httpPages(get, '/v1/managed-resources?resourceGroup=group-b1', 1, byName, TENANT_A),
      [[]],
      "another tenant's group lists nothing",
    )

    const dpus = await httpPages(get, '/v1/dpus', 4, (d) => d.id)
    t.same(dpus, [
      ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4'],
      ['dpu-5', 'dpu-6'],
    ])
    t.same(
      await httpPages(get, '/v1/dpus', 3, (d) => d.id, TENANT_B),
      [['dpu-5', 'dpu-6']],
      'a tenant pages only the DPUs assigned to it',
    )

    // Address order is not text order: .9 < .10 < .20 < .100.
    for (const ip of [
      '203.0.113.100',
      '203.0.113.9',
      '198.51.100.7',
      '203.0.113.20',
      '203.0.113.10',
    ]) {
      await p.client.registerPublicIp(ip)
    }
    const ips = await httpPages(get, '/v1/public-ips', 2, (i) => i.ip)
    t.same(ips, [
      ['198.51.100.7', '203.0.113.9'],
      ['203.0.113.10', '203.0.113.20'],
      ['203.0.113.100'],
    ])
  })

  t.test('gRPC: page_size and page_token, next_page_token empty on the last page', async (t) => {
    const groups = await grpcPages(call, 'listResourceGroups', {}, 3, byName)
    t.same(sizes(groups), [3, 3, 3])
    t.same(groups.flat(), all)
    const a = await grpcPages(call, 'listResourceGroups', {}, 3, byName, TENANT_A)
    t.same(sizes(a), [3, 3, 1])
    t.same(a.flat(), groupsA)
    const hosts = await grpcPages(call, 'listManagedResources', {}, 3, byName, TENANT_B)
    t.same(hosts, [hostsB])
    t.same(
      (
        await grpcPages(call, 'listManagedResources', { resourceGroup: 'group-a2' }, 1, byName)
      ).flat(),
      ['host-a3', 'host-a4'],
    )
    t.same(await grpcPages(call, 'listPublicIps', {}, 3, (i) => i.ip), [
      ['198.51.100.7', '203.0.113.9', '203.0.113.10'],
      ['203.0.113.20', '203.0.113.100'],
    ])
    t.same(sizes(await grpcPages(call, 'listDpus', {}, 5, (d) => d.id)), [5, 1])

    const old = await call('listResourceGroups', {})
    t.same(
      old.res.resourceGroups.map(byName),
      all,
      'a client that sends no page_size gets the default page',
    )
    t.equal(old.res.nextPageToken, '')
    const huge = await call('listResourceGroups', { pageSize: 5000 })
    t.equal(huge.error, undefined, 'a page_size above the maximum is taken as the maximum')
  })

  t.test("a token never shows a tenant another tenant's objects", async (t) => {
    // The operator's first page ends at group-a3; tenant-b continues from there.
    const first = await get('/v1/resource-groups?limit=3')
    t.ok(first.json.continue)
    const b = await get(`/v1/resource-groups?limit=10&continue=${first.json.continue}`, TENANT_B)
    t.equal(b.status, 200)
    t.same(b.json.items.map(byName), groupsB, 'its own groups after the position, nothing else')
    const viaGrpc = await call('listResourceGroups', { pageSize: 3 })
    const more = await call(
      'listResourceGroups',
      { pageSize: 10, pageToken: viaGrpc.res.nextPageToken },
      TENANT_B,
    )
    t.same(more.res.resourceGroups.map(byName), groupsB)
    const hostsB = await get(
      `/v1/managed-resources?continue=${(await get('/v1/managed-resources?limit=1')).json.continue}`,
      TENANT_B,
    )
    t.ok(
      hostsB.json.items.every((h: Json) => h.spec.resourceGroup === 'group-b1'),
      'hosts too',
    )
  })

  t.test('a bad limit or continue is 400 (gRPC INVALID_ARGUMENT) naming it', async (t) => {
    const groupsToken = (await get('/v1/resource-groups?limit=1')).json.continue
    const cases: [string, string, string][] = [
      ['limit 0', '/v1/resource-groups?limit=0', 'limit'],
      ['limit over the maximum', '/v1/managed-resources?limit=1001', 'limit'],
      ['limit not a number', '/v1/dpus?limit=ten', 'limit'],
      ['limit negative', '/v1/public-ips?limit=-3', 'limit'],
      ['continue not a token', '/v1/resource-groups?continue=abc', 'continue'],
      ['continue of another list', `/v1/managed-resources?continue=${groupsToken}`, 'continue'],
      ['continue not base64url', '/v1/dpus?continue=%24%24', 'continue'],
    ]
    for (const [name, path, field] of cases) {
      const { status, json } = await get(path)
      t.equal(status, 400, name)
      t.equal(json.error.code, 'INVALID', name)
      t.same(
        json.error.issues.map((i: Json) => i.path),
        [field],
        name,
      )
    }
    const issues = (e?: grpc.ServiceError) =>
      JSON.parse(String(e?.metadata.get('hz-issues')[0] ?? '[]')).map((i: Json) => i.path)
    const negative = await call('listDpus', { pageSize: -1 })
    t.equal(negative.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(issues(negative.error), ['page_size'])
    const forged = await call('listPublicIps', { pageToken: groupsToken })
    t.equal(forged.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(issues(forged.error), ['page_token'])
  })

  t.test('paging stays correct while groups are added', async (t) => {
    const first = await get('/v1/resource-groups?limit=3', TENANT_A)
    t.same(first.json.items.map(byName), ['group-a1', 'group-a2', 'group-a3'])
    // One before the cursor (not shown: already passed), one after it (shown once).
    await p.client.applyGroup('group-a0', groupSpec('tenant-a', '10.1.100.0/24', '10.1.100.1'))
    await p.client.applyGroup('group-a35', groupSpec('tenant-a', '10.1.101.0/24', '10.1.101.1'))
    const rest: string[] = []
    let next: string | undefined = first.json.continue
    while (next !== undefined) {
      const page = await get(`/v1/resource-groups?limit=3&continue=${next}`, TENANT_A)
      rest.push(...page.json.items.map(byName))
      next = page.json.continue
    }
    t.same(rest, ['group-a35', 'group-a4', 'group-a5', 'group-a6', 'group-a7'])
  })

  t.test('the default page is 500', async (t) => {
    // Stored directly (no jobs): only the listing is under test.
    for (let i = 0; i < 500; i++) {
      await p.store.groups.put(
        `bulk-${String(i).padStart(3, '0')}`,
        groupSpec('tenant-c', `10.200.${i % 250}.0/24`, `10.200.${i % 250}.1`),
      )
    }
    const first = await get('/v1/resource-groups')
    t.equal(first.json.items.length, 500)
    t.ok(first.json.continue, 'more remain')
    const second = await get(`/v1/resource-groups?continue=${first.json.continue}`)
    t.equal(first.json.items.length + second.json.items.length, 500 + all.length + 2)
    t.equal(second.json.continue, undefined)
    const viaGrpc = await call('listResourceGroups', {})
    t.equal(viaGrpc.res.resourceGroups.length, 500)
    t.not(viaGrpc.res.nextPageToken, '')
  })
})

/**
 * `networkImplementationType` over HTTP on a running pipeline: the operator's default
 * stored when a request leaves it out, immutable once the group exists (409 naming the
 * field, nothing stored), a bad value a 400 naming it, groups stored before the field (or
 * with the retired `implementation: SharedCentral`) read as Overlay and stay writable.
 */
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import type { ResourceGroupSpec } from '../../lib/model/objects.ts'
import { jsonCaller } from '../helpers/http.ts'
import { OPERATOR, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'

const RANGES = {
  vnis: { first: 10000, last: 19999, setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: 100, last: 3999, setting: 'HYDRAZINE_FABRIC_VLANS' },
}

function api(p: Pipeline) {
  const app = createApp({
    readiness: { redis: async () => true },
    v1: { client: p.client, tokens: TEST_TOKENS },
  })
  return jsonCaller(app, OPERATOR)
}

const paths = (json: { error: { issues?: { path: string }[] } }) =>
  (json.error.issues ?? []).map((i) => i.path)

t.test('operator default Overlay', async (t) => {
  const p = await startPipeline(t, {
    networkImplementation: { defaultType: 'Overlay', fabricRanges: RANGES },
  })
  const call = api(p)

  t.test(
    'left out: the default, stored explicitly; the same PUT again changes nothing',
    async (t) => {
      const put = await call('PUT', '/v1/resource-groups/group-a', groupSpec('tenant-a'))
      t.equal(put.status, 202)
      t.equal(put.json.object.spec.networkImplementationType, 'Overlay')
      const again = await call('PUT', '/v1/resource-groups/group-a', groupSpec('tenant-a'))
      t.equal(again.status, 200, 'left out again: the group keeps its own')
      const fabric = await call('PUT', '/v1/resource-groups/group-b', {
        ...groupSpec('tenant-a'),
        networkImplementationType: 'Fabric',
      })
      t.equal(fabric.status, 202)
      t.equal(fabric.json.object.spec.networkImplementationType, 'Fabric', 'as asked')
      const kept = await call('PUT', '/v1/resource-groups/group-b', groupSpec('tenant-a'))
      // A Failed group sent its spec again is tried again (202), its spec unchanged.
      t.ok([200, 202].includes(kept.status), 'accepted')
      t.equal(kept.json.object.specVersion, fabric.json.object.specVersion, 'the spec unchanged')
      t.equal(kept.json.object.spec.networkImplementationType, 'Fabric', 'still Fabric')
    },
  )

  t.test('a dry run of a Fabric group: nothing in OVN, what it would hold', async (t) => {
    const body = { ...groupSpec('tenant-a'), networkImplementationType: 'Fabric' }
    const fresh = await call('PUT', '/v1/resource-groups/group-d?dryRun=true', body)
    t.equal(fresh.status, 200)
    t.match(fresh.json, {
      dryRun: true,
      nb: { central: null, insert: [], update: [], delete: [] },
      agentJobs: [],
      notes: [/group-d is a Fabric group: it would take a VNI and a VLAN id.*report Failed/],
    })
    t.equal((await call('GET', '/v1/resource-groups/group-d')).status, 404, 'nothing stored')
    const held = await until(
      () => p.controller.ipam.fabricIdsOf('group-b'),
      (ids) => ids !== undefined,
    )
    const kept = await call('PUT', '/v1/resource-groups/group-b?dryRun=true', body)
    t.match(kept.json.notes, [new RegExp(`it keeps VNI ${held?.vni} and VLAN ${held?.vlan}`)])
  })

  t.test('immutable: a change is 409 naming the field, nothing stored', async (t) => {
    const before = (await call('GET', '/v1/resource-groups/group-a')).json
    for (const [group, type] of [
      ['group-a', 'Fabric'],
      ['group-b', 'Overlay'],
    ]) {
      const refused = await call('PUT', `/v1/resource-groups/${group}`, {
        ...groupSpec('tenant-a'),
        networkImplementationType: type,
      })
      t.equal(refused.status, 409, `${group} → ${type}`)
      t.equal(refused.json.error.code, 'CONFLICT')
      t.same(paths(refused.json), ['networkImplementationType'])
      t.match(refused.json.error.message, /cannot become/)
    }
    const dry = await call('PUT', '/v1/resource-groups/group-a?dryRun=true', {
      ...groupSpec('tenant-a'),
      networkImplementationType: 'Fabric',
    })
    t.equal(dry.status, 409, 'a dry run answers the same')
    const after = (await call('GET', '/v1/resource-groups/group-a')).json
    t.equal(after.specVersion, before.specVersion, 'not stored')
    t.equal(after.spec.networkImplementationType, 'Overlay')
  })

  t.test('the store refuses a change too, naming the field', async (t) => {
    const refused = await p.controller.store.groups
      .put('group-a', { ...groupSpec('tenant-a'), networkImplementationType: 'Fabric' })
      .catch((e: unknown) => e)
    t.match(refused, {
      code: 'CONFLICT',
      reason: 'Immutable',
      message: /^networkImplementationType of resource group group-a cannot change/,
    })
  })

  t.test('a bad value, or the retired field, is 400 naming the field', async (t) => {
    const cases: [unknown, string][] = [
      [
        { ...groupSpec('tenant-a'), networkImplementationType: 'overlay' },
        'networkImplementationType',
      ],
      [{ ...groupSpec('tenant-a'), networkImplementationType: 1 }, 'networkImplementationType'],
      [{ ...groupSpec('tenant-a'), implementation: 'SharedCentral' }, 'implementation'],
    ]
    for (const [body, path] of cases) {
      const refused = await call('PUT', '/v1/resource-groups/group-c', body)
      t.equal(refused.status, 400)
      t.equal(refused.json.error.code, 'INVALID')
      t.same(paths(refused.json), [path])
      const expected =
        path === 'implementation' ? /retired.*networkImplementationType/ : /Overlay or Fabric/
      t.match(refused.json.error.issues[0].message, expected)
    }
    t.equal((await call('GET', '/v1/resource-groups/group-c')).status, 404, 'nothing stored')
  })

  t.test('groups stored before the field read as Overlay and stay writable', async (t) => {
    const legacy = [
      ['group-old', groupSpec('tenant-a')],
      ['group-shared', { ...groupSpec('tenant-a'), implementation: 'SharedCentral' }],
    ] as const
    for (const [name, spec] of legacy) {
      // As an earlier version stored them (its fingerprint spelt the retired field).
      await p.controller.store.groups.put(name, spec as unknown as ResourceGroupSpec)
      const key = `hz:{store}:rg:${name}`
      t.ok(await p.controller.redis.hexists(key, 'immutable'), `${name} is stored at ${key}`)
      await p.controller.redis.hset(
        key,
        'immutable',
        JSON.stringify([
          'tenant-a',
          spec.network,
          'implementation' in spec ? 'SharedCentral' : null,
        ]),
      )
      const put = await call('PUT', `/v1/resource-groups/${name}`, groupSpec('tenant-a'))
      t.equal(put.status, 202, `${name}: accepted`)
      t.equal(put.json.object.spec.networkImplementationType, 'Overlay', `${name}: Overlay, stored`)
      const fabric = await call('PUT', `/v1/resource-groups/${name}`, {
        ...groupSpec('tenant-a'),
        networkImplementationType: 'Fabric',
      })
      t.equal(fabric.status, 409, `${name}: still immutable`)
    }
  })
})

t.test('operator default Fabric', async (t) => {
  const p = await startPipeline(t, {
    networkImplementation: { defaultType: 'Fabric', fabricRanges: RANGES },
  })
  const call = api(p)
  const put = await call('PUT', '/v1/resource-groups/group-f', groupSpec('tenant-a'))
  t.equal(put.status, 202)
  t.equal(
    put.json.object.spec.networkImplementationType,
    'Fabric',
    'the operator’s default, stored',
  )
  const overlay = await call('PUT', '/v1/resource-groups/group-o', {
    ...groupSpec('tenant-a'),
    networkImplementationType: 'Overlay',
  })
  t.equal(
    overlay.json.object.spec.networkImplementationType,
    'Overlay',
    'a request may ask otherwise',
  )
})

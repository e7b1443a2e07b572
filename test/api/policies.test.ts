/**
 * A group's security policies through the HTTP and gRPC APIs against a running pipeline
 * (one OVN central per group, in-process agents): every bad field refused naming it, a
 * deny rule that `GET /v1/trace` shows dropping what it names and nothing else, the
 * group's `PoliciesApplied` condition, and the rules read back over both APIs.
 *
 * group-a: h1 on dpu-1, h2 and h3 on dpu-2; the rule: no h1 → h2.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import { createApp } from '../../api/http/app.ts'
import { jsonCaller } from '../helpers/http.ts'
import { groupSpec, hostSpec, startPipeline, until } from '../pipeline/fixtures.ts'
import { refusalSnapshot } from '../pipeline/scenarios.ts'
import { startIngress } from './grpc-fixture.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const denyH1ToH2 = {
  name: 'deny-h1',
  direction: 'ingress',
  action: 'deny',
  hosts: ['h2'],
  peer: { hosts: ['h1'] },
}

t.test('security policies over the APIs', async (t) => {
  const p = await startPipeline(t, { perGroup: true })
  for (const dpu of ['dpu-1', 'dpu-2']) await p.agent(dpu)
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens: { operator: [OPERATOR], tenants: {} } },
  })
  const call = jsonCaller(app, OPERATOR)
  const { call: grpcCall } = await startIngress(t, p)
  const group = () => p.controller.store.groups.get('group-a')
  const condition = async () =>
    (await group())?.status.conditions.find((c) => c.type === 'PoliciesApplied')
  const trace = async (query: string) => (await call('GET', `/v1/trace?${query}`)).json

  await t.test('HTTP: every bad field is a 400 naming it, and nothing is stored', async (t) => {
    const before = await refusalSnapshot(p)
    const bad = await call('PUT', '/v1/resource-groups/group-a', {
      ...groupSpec('tenant-a'),
      policies: [
        { ...denyH1ToH2, ports: '22' },
        { ...denyH1ToH2, name: 'both', peer: { hosts: ['h1'], cidr: '10.0.0.0/8' } },
        { ...denyH1ToH2, name: 'Upper', direction: 'in' },
        denyH1ToH2,
      ],
    })
    t.equal(bad.status, 400)
    t.equal(bad.json.error.code, 'INVALID')
    t.same(
      bad.json.error.issues.map((i: { path: string }) => i.path).sort(),
      ['policies.0.ports', 'policies.1.peer', 'policies.2.direction', 'policies.2.name'],
      'each bad field by its path',
    )
    t.match(bad.json.error.issues, [{ path: 'policies.0.ports', message: /tcp or udp/ }])
    const twice = await call('PUT', '/v1/resource-groups/group-a', {
      ...groupSpec('tenant-a'),
      policies: [denyH1ToH2, denyH1ToH2],
    })
    t.equal(twice.status, 400)
    t.match(twice.json.error.issues, [{ path: 'policies.1.name', message: /repeats the name/ }])
    t.same(await refusalSnapshot(p), before, 'nothing changed')
  })

  await t.test('a dry run plans the port groups and ACLs', async (t) => {
    const plan = await call('PUT', '/v1/resource-groups/group-a?dryRun=true', {
      ...groupSpec('tenant-a'),
      policies: [denyH1ToH2],
    })
    t.equal(plan.status, 200)
    t.ok(plan.json.nb.insert.includes('Port_Group/pg/all'), 'the port group of every host')
    t.ok(plan.json.nb.insert.includes('ACL/acl/pg/all/baseline'), 'the baseline ACL')
  })

  await t.test('a rule naming hosts the group does not have yet', async (t) => {
    const put = await call('PUT', '/v1/resource-groups/group-a', {
      ...groupSpec('tenant-a'),
      policies: [denyH1ToH2],
    })
    t.equal(put.status, 202)
    t.same(put.json.object.spec.policies, [{ ...denyH1ToH2, protocol: 'any' }], 'stored as sent')
    const c = await until(condition, (c) => c?.reason === 'HostsNotInGroup')
    t.match(c, {
      status: 'True',
      message:
        "the 1 rule of the group is applied; rule deny-h1 names h2, h1, not (yet) on the group's network: it applies to no one",
    })
    t.ok(
      await until(
        async () => (await group())?.status.phase,
        (ph) => ph === 'Ready',
      ),
    )
  })

  await t.test('with its hosts attached, the rule drops h1 → h2 only', async (t) => {
    await p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1))
    await p.client.applyHost('h2', hostSpec('group-a', 'dpu-2', 2))
    await p.client.applyHost('h3', hostSpec('group-a', 'dpu-2', 3))
    for (const h of ['h1', 'h2', 'h3']) {
      const host = await until(
        () => p.controller.store.hosts.get(h),
        (x) => x?.status.phase === 'Ready',
        60_000,
      )
      t.equal(host?.status.phase, 'Ready', `${h} is Ready`)
    }
    t.match(await until(condition, (c) => c?.reason === 'RulesApplied'), {
      status: 'True',
      message: 'the 1 rule of the group is applied',
    })
    for (const query of ['from=h1&to=h2', 'from=h1&to=h2&proto=tcp&port=22']) {
      const answer = await trace(query)
      t.equal(answer.verdict, 'dropped', `${query}: dropped`)
      t.match(answer.dropped, { reason: /ACL/ }, `${query}: by an ACL`)
    }
    t.equal((await trace('from=h3&to=h2')).verdict, 'delivered', 'h3 → h2 is not named')
    t.equal((await trace('from=h2&to=h1')).verdict, 'delivered', 'nor h2 → h1')
  })

  await t.test('gRPC: the rules read back; a bad one is refused naming its field', async (t) => {
    const got = await grpcCall('getResourceGroup', { name: 'group-a' })
    t.same(got.res.resourceGroup.spec.policies, [
      {
        name: 'deny-h1',
        direction: 'POLICY_DIRECTION_INGRESS',
        action: 'POLICY_ACTION_DENY',
        hosts: ['h2'],
        peer: { hosts: ['h1'] },
        protocol: 'POLICY_PROTOCOL_ANY',
      },
    ])
    const bad = await grpcCall('applyResourceGroup', {
      name: 'group-a',
      spec: {
        ...groupSpec('tenant-a'),
        policies: [
          {
            ...got.res.resourceGroup.spec.policies[0],
            protocol: 'POLICY_PROTOCOL_TCP',
            ports: '80-70',
          },
        ],
      },
    })
    t.equal(bad.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(
      statusDetailsOf(bad.error?.metadata).badRequest?.fieldViolations.map((v) => v.field),
      ['spec.policies[0].ports'],
    )
  })

  await t.test('gRPC: removing the rules restores h1 → h2', async (t) => {
    const put = await grpcCall('applyResourceGroup', {
      name: 'group-a',
      spec: groupSpec('tenant-a'),
    })
    t.equal(put.error, undefined)
    t.equal(await until(condition, (c) => c === undefined), undefined, 'no rules: no condition')
    t.equal((await trace('from=h1&to=h2')).verdict, 'delivered')
  })
})

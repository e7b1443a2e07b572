/**
 * `?dryRun=true` on PUT and DELETE: the plan (NB rows, FRR prefixes, agent jobs,
 * addresses) of groups, hosts and public IPs, with the store, the address pools, NB and
 * FRR identical before and after — and a plan that matches what the real request does.
 */
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import type { ChangePlan } from '../../lib/model/plans.ts'
import { jsonCaller } from '../helpers/http.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from './fixtures.ts'
import { groupsSettled, startPipelineFrr } from './scenarios.ts'

function api(p: Pipeline) {
  const app = createApp({
    readiness: {},
    v1: {
      client: p.client,
      tokens: TEST_TOKENS,
    },
  })
  return jsonCaller(app, OPERATOR)
}

t.test('dry runs plan without changing anything', async (t) => {
  const p = await startPipeline(t, { frr: true })
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  const frr = await startPipelineFrr(t, p)
  const call = api(p)

  await p.client.registerPublicIp('203.0.113.7')
  await p.client.registerPublicIp('203.0.113.8')
  await p.client.applyGroup('group-d', groupSpec())
  await p.client.applyHost(
    'host-1',
    hostSpec('group-d', 'dpu-1', 1, { hostAccess: 'PublicAccess' }),
  )
  await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => h?.status.phase === 'Ready',
  )

  // dpu-2 in the inventory, assigned to tenant-a (its tenant may place hosts on it).
  t.equal(
    (
      await call('PUT', '/v1/dpus/dpu-2', {
        tenantId: 'tenant-a',
        fabricIps: dpuFabricIps('dpu-2'),
        hostPorts: ['pf0'],
      })
    ).status,
    201,
  )

  /** Everything a request could change: stored objects, pools, NB rows, FRR, queued jobs. */
  const snapshot = async () => ({
    settled: await groupsSettled(p),
    groups: await p.controller.store.groups.list(),
    hosts: await p.controller.store.hosts.list(),
    dpus: await p.controller.store.dpus.list(),
    addresses: await p.controller.ipam.allocations('group-d'),
    publicIps: await p.client.listPublicIps(),
    ports: await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port'),
    nats: await p.nbctl('--bare', '--columns=external_ip,logical_ip', 'list', 'NAT'),
    switches: await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch'),
    frr: [...(await frr.table())].sort(),
    jobs: await p.controller.queue.getJobCounts('waiting', 'delayed', 'active', 'completed'),
  })
  const before = await snapshot()
  const plan = async (method: string, path: string, body?: unknown) => {
    const res = await call(method, `${path}?dryRun=true`, body)
    t.equal(res.status, 200, `${method} ${path}: planned`)
    return res.json as ChangePlan
  }

  const newGroup = await plan(
    'PUT',
    '/v1/resource-groups/group-e',
    groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'),
  )
  t.equal(newGroup.dryRun, true)
  t.ok(newGroup.nb.insert.includes('Logical_Switch/ls'), 'a new group inserts its switch')
  t.ok(newGroup.nb.insert.includes('Logical_Router/lr'), 'and its router')
  t.same([newGroup.nb.update, newGroup.nb.delete, newGroup.agentJobs], [[], [], []])
  t.match(newGroup.notes, ['the group would be created (version 1)'])

  const sameGroup = await plan('PUT', '/v1/resource-groups/group-d', groupSpec())
  t.same(sameGroup.nb, { ...sameGroup.nb, insert: [], update: [], delete: [] }, 'applied: no rows')
  t.match(sameGroup.notes, ['the spec is stored as given: nothing would change'])

  const newHost = await plan(
    'PUT',
    '/v1/managed-resources/host-2',
    hostSpec('group-d', 'dpu-2', 2, { hostAccess: 'PublicAccess' }),
  )
  t.ok(newHost.nb.insert.includes('Logical_Switch_Port/lsp/hz/group-d/host-2'), 'its port')
  t.same(newHost.agentJobs, [{ dpu: 'dpu-2', job: 'configure', host: 'host-2' }])
  t.same(newHost.frr.announce, [{ prefix: '203.0.113.8/32', nextHop: '172.18.0.112' }])
  t.ok(
    newHost.nb.insert.includes('Logical_Router/gw/dpu-2'),
    "a gateway router on the new host's DPU",
  )
  t.match(newHost.addresses.allocate, [
    { pool: 'group', owner: 'host-2', ip: String },
    { pool: 'public', owner: 'host-2', ip: '203.0.113.8' },
  ])
  t.ok(
    newHost.nb.insert.some((id) => id.startsWith('NAT/') && id.includes('203.0.113.8')),
    'a NAT row for its public IP',
  )

  // A tenant's plan does not show which public IP the shared pool would pick, nor the
  // controller's database address.
  const own = await call(
    'PUT',
    '/v1/managed-resources/host-2?dryRun=true',
    {
      ...hostSpec('group-d', 'dpu-2', 2, { hostAccess: 'PublicAccess' }),
      dpu: { id: 'dpu-2' },
      identifier: 'pf0',
    },
    TENANT_A,
  )
  t.equal(own.status, 200, JSON.stringify(own.json))
  t.same(own.json.frr.announce, [{ prefix: null, nextHop: '172.18.0.112' }])
  t.match(own.json.addresses.allocate, [{ pool: 'group' }, { pool: 'public', ip: null }])
  t.notMatch(JSON.stringify(own.json), /203\.0\.113\.8/, 'the pool is not peeked')
  t.notMatch(String(own.json.nb.central), /\//, 'a service name, not an NB remote')

  // A second NATed host behind dpu-1's NAT IP: refused as the real request is.
  const clash = await call(
    'PUT',
    '/v1/managed-resources/host-3?dryRun=true',
    hostSpec('group-d', 'dpu-1', 3, { hostAccess: 'FabricAccess' }),
  )
  t.equal(clash.status, 409)
  t.match(clash.json, { error: { message: /NAT IP 172\.18\.0\.111 is already in use/ } })

  const detach = await plan('DELETE', '/v1/managed-resources/host-1')
  t.ok(detach.nb.delete.includes('Logical_Switch_Port/lsp/hz/group-d/host-1'), 'its port goes')
  t.same(detach.agentJobs, [{ dpu: 'dpu-1', job: 'isolate', host: 'host-1' }])
  t.same(detach.frr.withdraw, [{ prefix: '203.0.113.7/32' }])
  t.match(detach.addresses.release, [
    { pool: 'group', owner: 'host-1' },
    { pool: 'public', owner: 'host-1', ip: '203.0.113.7' },
  ])

  const teardown = await plan('DELETE', '/v1/resource-groups/group-d')
  t.ok(teardown.nb.delete.includes('Logical_Switch/ls') && teardown.nb.insert.length === 0)
  t.same(teardown.agentJobs, [{ dpu: 'dpu-1', job: 'isolate', host: 'host-1' }])

  t.match((await plan('PUT', '/v1/public-ips/203.0.113.9')).notes, [
    '203.0.113.9 would join the pool',
  ])
  t.equal((await call('DELETE', '/v1/public-ips/203.0.113.7?dryRun=true')).status, 409, 'in use')

  // Refused exactly as the real request would be.
  const bad = await call('PUT', '/v1/resource-groups/group-f?dryRun=true', {
    tenantId: 'tenant-a',
    network: { cidr: '10.0.0.0/33', gateway: '10.0.0.1' },
  })
  t.equal(bad.status, 400)
  t.match(bad.json, { error: { issues: [{ path: 'network.cidr' }] } })
  const maybe = await call('PUT', '/v1/resource-groups/group-e?dryRun=maybe', groupSpec())
  t.equal(maybe.status, 400, 'dryRun must be a boolean: never a real write by mistake')
  t.match(maybe.json, { error: { issues: [{ path: 'dryRun' }] } })
  const stranger = await call(
    'PUT',
    '/v1/managed-resources/host-9?dryRun=true',
    hostSpec('group-d', 'dpu-1', 9),
    TENANT_B,
  )
  t.equal(stranger.status, 400, "another tenant's group looks like none")
  t.equal((await call('DELETE', '/v1/managed-resources/nope?dryRun=true')).status, 404)

  t.same(await snapshot(), before, 'the store, pools, NB, FRR and queues are as they were')

  // The plan said what the real request does.
  await p.client.applyHost(
    'host-2',
    hostSpec('group-d', 'dpu-2', 2, { hostAccess: 'PublicAccess' }),
  )
  const attached = await until(
    () => p.controller.store.hosts.get('host-2'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(attached?.status.hostAccessIPs?.publicIP, '203.0.113.8', 'the public IP planned')
  t.equal(
    attached?.status.hostAccessIPs?.hostIP,
    newHost.addresses.allocate[0]?.ip,
    'the address planned',
  )
  t.equal((await frr.table()).get('203.0.113.8/32'), '172.18.0.112', 'the announcement planned')
})

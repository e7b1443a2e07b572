/**
 * The gRPC ingress against a running pipeline, on typed messages: writes and reads of
 * groups, hosts and public IPs, tenant scoping, and refusals — each with its status,
 * `google.rpc.ErrorInfo` and (for bad input) `google.rpc.BadRequest` naming the request's
 * proto fields — that change nothing. Watch: `grpc-watch.test.ts`.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import type { HydrazineClient } from '../../app/index.ts'
import { groupSpec, startPipeline, until } from '../pipeline/fixtures.ts'
import { refusalSnapshot as snapshot } from '../pipeline/scenarios.ts'
import {
  type Answer,
  hostMessage,
  type Method,
  metadataOf,
  OPERATOR,
  startIngress,
  TENANT_A,
  TENANT_B,
} from './grpc-fixture.ts'

const issuesOf = (a: Answer) => JSON.parse(String(a.error?.metadata.get('hz-issues')[0] ?? '[]'))
const violationsOf = (a: Answer) =>
  statusDetailsOf(a.error?.metadata).badRequest?.fieldViolations.map((v) => v.field) ?? []

t.test('gRPC ingress against a running pipeline', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const { call } = await startIngress(t, p)

  t.test(
    'group: typed spec in, typed object out; an unchanged apply enqueues nothing',
    async (t) => {
      const put = await call('applyResourceGroup', { name: 'group-a', spec: groupSpec('tenant-a') })
      t.equal(put.error, undefined)
      t.ok(put.res.jobId, 'a job was enqueued')
      t.match(put.res.resourceGroup, {
        name: 'group-a',
        specVersion: '1',
        spec: {
          tenantId: 'tenant-a',
          network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
          networkImplementationType: 'NETWORK_IMPLEMENTATION_TYPE_OVERLAY',
        },
        status: { phase: 'RESOURCE_GROUP_PHASE_PROVISIONING' },
        createdAt: { seconds: /^\d+$/ },
      })
      const again = await call('applyResourceGroup', {
        name: 'group-a',
        spec: groupSpec('tenant-a'),
      })
      t.equal(again.res.jobId, undefined, 'nothing enqueued for an unchanged spec')
      const ready = await until(
        async () => (await call('getResourceGroup', { name: 'group-a' })).res.resourceGroup,
        (g) => g.status.phase === 'RESOURCE_GROUP_PHASE_READY',
      )
      t.match(ready.status, { observedVersion: '1', configsSynced: true })
      t.ok(
        ready.status.conditions.every(
          (c: { status: string; lastTransitionTime: { seconds: string } }) =>
            c.status.startsWith('CONDITION_STATUS_') && Number(c.lastTransitionTime.seconds) > 0,
        ),
        'conditions with enum status and Timestamp times',
      )
    },
  )

  t.test('host: Ready with the in-process agent, listed by group', async (t) => {
    const put = await call('applyManagedResource', {
      name: 'host-1',
      spec: hostMessage('group-a', 'dpu-1', 1, { hostAccess: 'HOST_ACCESS_FABRIC_ACCESS' }),
    })
    t.equal(put.error, undefined)
    t.ok(put.res.jobId)
    t.match(put.res.managedResource.spec, {
      type: 'RESOURCE_TYPE_BARE_METAL',
      hostMac: '52:54:00:00:05:01',
      hostAccess: 'HOST_ACCESS_FABRIC_ACCESS',
      dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'] },
    })
    const host = await until(
      async () => (await call('getManagedResource', { name: 'host-1' }, TENANT_A)).res,
      (r) => r?.managedResource.status.phase === 'MANAGED_RESOURCE_PHASE_READY',
    )
    t.match(host.managedResource.status, {
      configsSynced: true,
      hostAccessIps: { fabricIp: '172.18.0.111' },
      agent: { ovnInstalled: true },
    })
    const listed = await call('listManagedResources', { resourceGroup: 'group-a' })
    t.same(
      listed.res.managedResources.map((h: { name: string }) => h.name),
      ['host-1'],
    )
  })

  t.test('a second tenant and its group', async (t) => {
    const spec = groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1')
    t.equal(
      (await call('applyResourceGroup', { name: 'group-b', spec }, TENANT_B)).error,
      undefined,
    )
  })

  t.test('auth matrix', async (t) => {
    const S = grpc.status
    const cases: [string, Method, object, string | undefined, grpc.status][] = [
      ['operator reads any group', 'getResourceGroup', { name: 'group-a' }, OPERATOR, S.OK],
      ['tenant reads its own group', 'getResourceGroup', { name: 'group-a' }, TENANT_A, S.OK],
      ["tenant reads another's", 'getResourceGroup', { name: 'group-a' }, TENANT_B, S.NOT_FOUND],
      ['no token', 'getResourceGroup', { name: 'group-a' }, undefined, S.UNAUTHENTICATED],
      ['unknown token', 'getResourceGroup', { name: 'group-a' }, 'nope-0123456789ab', 16],
      ['tenant reads its own host', 'getManagedResource', { name: 'host-1' }, TENANT_A, S.OK],
      ["tenant reads another's host", 'getManagedResource', { name: 'host-1' }, TENANT_B, 5],
      ['tenant lists public IPs', 'listPublicIps', {}, TENANT_A, S.PERMISSION_DENIED],
      ['operator lists public IPs', 'listPublicIps', {}, OPERATOR, S.OK],
      ['no token lists public IPs', 'listPublicIps', {}, undefined, S.UNAUTHENTICATED],
      ['tenant lists its DPUs', 'listDpus', {}, TENANT_A, S.OK],
      ['tenant issues DPU credentials', 'issueDpuCredentials', { name: 'dpu-1' }, TENANT_A, 7],
    ]
    for (const [name, method, request, token, status] of cases) {
      const answer = await call(method, request, token)
      t.equal(answer.error?.code ?? S.OK, status, name)
    }
    const unauthenticated = await call('getResourceGroup', { name: 'group-a' }, undefined)
    t.equal(statusDetailsOf(unauthenticated.error?.metadata).errorInfo?.reason, 'UNAUTHENTICATED')
    const names = async (token: string, tenant?: string) =>
      (
        await call('listResourceGroups', tenant === undefined ? {} : { tenant }, token)
      ).res.resourceGroups.map((g: { name: string }) => g.name)
    t.same(await names(OPERATOR), ['group-a', 'group-b'], 'operator lists every group')
    t.same(await names(OPERATOR, 'tenant-b'), ['group-b'], 'operator filters by tenant')
    t.same(await names(TENANT_A), ['group-a'], 'a tenant lists only its own')
    t.same(await names(TENANT_A, 'tenant-b'), [], "a tenant cannot list another's")
    const hosts = await call('listManagedResources', {}, TENANT_B)
    t.same(hosts.res.managedResources, [], "a tenant does not list another's hosts")
    const dpu = await call('getDpu', { name: 'dpu-1' })
    t.match(dpu.res.dpu, {
      id: 'dpu-1',
      spec: { tenantId: 'tenant-a', fabricIps: ['172.18.0.11', '172.18.0.111'] },
      state: 'DPU_STATE_UNKNOWN',
      hosts: ['host-1'],
    })
  })

  t.test('public IPs: register, read, list, refuse removal while allocated', async (t) => {
    const reg = await call('registerPublicIp', { ip: '203.0.113.10' })
    t.match(reg.res.publicIp, { ip: '203.0.113.10', allocated: false })
    t.equal((await call('registerPublicIp', { ip: '203.0.113.11' })).error, undefined)
    t.match((await call('getPublicIp', { ip: '203.0.113.10' })).res.publicIp, {
      ip: '203.0.113.10',
    })
    const allocated = await p.controller.ipam.allocatePublicIp('host-x')
    const before = await snapshot(p)
    const del = await call('unregisterPublicIp', { ip: allocated })
    t.equal(del.error?.code, grpc.status.FAILED_PRECONDITION, 'allocated: refused')
    t.same(await snapshot(p), before, 'nothing changed')
    const free = allocated === '203.0.113.10' ? '203.0.113.11' : '203.0.113.10'
    t.equal((await call('unregisterPublicIp', { ip: free })).error, undefined)
    t.same(
      (await call('listPublicIps', {})).res.publicIps.map((i: { ip: string }) => i.ip),
      [allocated],
    )
  })

  t.test('IPv6 public IPs: a pool of their own, any spelling the same address', async (t) => {
    const reg = await call('registerPublicIp', { ip: '2001:db8:ff::5' })
    t.equal(reg.error, undefined)
    t.match(reg.res.publicIp, { ip: '2001:db8:ff::5', allocated: false })
    const again = await call('registerPublicIp', { ip: '2001:DB8:FF:0::5' })
    t.equal(again.res.publicIp.ip, '2001:db8:ff::5', 'another spelling: the same, canonical')
    t.equal(
      (await call('getPublicIp', { ip: '2001:DB8:FF:0::5' })).res.publicIp.ip,
      '2001:db8:ff::5',
    )
    const listed = (await call('listPublicIps', {})).res.publicIps.map((i: { ip: string }) => i.ip)
    t.same(listed.slice(-1), ['2001:db8:ff::5'], 'listed once, after the IPv4 addresses')
    t.equal(listed.length, 2, 'beside the IPv4 one left')
    const bad = await call('registerPublicIp', { ip: '2001:db8::g' })
    t.equal(bad.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(violationsOf(bad), ['ip'], 'naming ip')
  })

  t.test('DPUs: nat_ip6 stored canonical, validated, on the hosts placed there', async (t) => {
    const spec = {
      tenantId: 'tenant-a',
      fabricIps: ['172.18.0.71', '172.18.0.171'],
      natIp6: 'FD00:FAB:0::105',
      hostPorts: ['pf0hpf'],
    }
    const put = await call('applyDpu', { name: 'dpu-v6', spec })
    t.equal(put.error, undefined)
    t.match(put.res.dpu, { id: 'dpu-v6', spec: { natIp6: 'fd00:fab::105' } })
    t.equal((await call('getDpu', { name: 'dpu-v6' })).res.dpu.spec.natIp6, 'fd00:fab::105')
    t.notOk(
      (await call('getDpu', { name: 'dpu-1' })).res.dpu.spec.natIp6,
      'unset on a DPU without one',
    )
    for (const natIp6 of ['10.0.0.1', 'nope']) {
      const refused = await call('applyDpu', { name: 'dpu-v6', spec: { ...spec, natIp6 } })
      t.equal(refused.error?.code, grpc.status.INVALID_ARGUMENT, `${natIp6}: refused`)
      t.same(violationsOf(refused), ['spec.nat_ip6'], `${natIp6}: naming spec.nat_ip6`)
    }
    t.equal((await call('getDpu', { name: 'dpu-v6' })).res.dpu.spec.natIp6, 'fd00:fab::105')

    // A host's stored spec carries its DPU's, output only: a spec read back applies again.
    const host = await call('applyManagedResource', {
      name: 'host-6',
      spec: { resourceGroup: 'group-a', hostMac: '52:54:00:00:06:06', dpu: { id: 'dpu-v6' } },
    })
    t.equal(host.error, undefined)
    const stored = host.res.managedResource.spec
    t.match(stored.dpu, {
      id: 'dpu-v6',
      ips: ['172.18.0.71', '172.18.0.171'],
      natIp6: 'fd00:fab::105',
    })
    const reapplied = await call('applyManagedResource', { name: 'host-6', spec: stored })
    t.equal(reapplied.error, undefined, 'the stored spec applies again')
    t.equal(reapplied.res.jobId, undefined, 'unchanged')
    const deleted = await call('deleteManagedResource', { name: 'host-6', force: true })
    t.equal(deleted.error, undefined)
    await until(
      async () => (await call('getManagedResource', { name: 'host-6' })).error?.code,
      (code) => code === grpc.status.NOT_FOUND,
    )
  })

  t.test('refused requests answer with a status and change nothing', async (t) => {
    const S = grpc.status
    const bad = { tenantId: 'Bad_Tenant', network: { cidr: '10.0.0.1/24', gateway: 'x' } }
    const cases: [string, Method, object, string | undefined, grpc.status, string | undefined][] = [
      [
        'invalid group',
        'applyResourceGroup',
        { name: 'group-c', spec: bad },
        OPERATOR,
        3,
        'INVALID',
      ],
      [
        'invalid name',
        'applyResourceGroup',
        { name: 'Bad_Name', spec: groupSpec() },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      ['no spec', 'applyResourceGroup', { name: 'group-c' }, OPERATOR, 3, 'INVALID'],
      [
        'unknown enum value',
        'applyManagedResource',
        { name: 'host-c', spec: { ...hostMessage('group-a', 'dpu-4', 4), hostAccess: 9 } },
        OPERATOR,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'no token',
        'applyResourceGroup',
        { name: 'group-c', spec: groupSpec() },
        undefined,
        16,
        'UNAUTHENTICATED',
      ],
      [
        'tenant creates a group for another tenant',
        'applyResourceGroup',
        { name: 'group-c', spec: groupSpec('tenant-b') },
        TENANT_A,
        S.PERMISSION_DENIED,
        'FORBIDDEN',
      ],
      [
        "tenant overwrites another tenant's group",
        'applyResourceGroup',
        { name: 'group-b', spec: groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1') },
        TENANT_A,
        S.FAILED_PRECONDITION,
        'NAME_TAKEN',
      ],
      [
        "tenant deletes another's group",
        'deleteResourceGroup',
        { name: 'group-b' },
        TENANT_A,
        5,
        'NOT_FOUND',
      ],
      [
        "tenant attaches a host to another tenant's group",
        'applyManagedResource',
        { name: 'host-9', spec: hostMessage('group-b', 'dpu-3', 9) },
        TENANT_A,
        S.INVALID_ARGUMENT,
        'INVALID',
      ],
      [
        'tenant registers a public IP',
        'registerPublicIp',
        { ip: '203.0.113.12' },
        TENANT_A,
        7,
        'FORBIDDEN',
      ],
      ['bad public IP', 'registerPublicIp', { ip: '203.0.113.300' }, OPERATOR, 3, 'INVALID'],
      ['missing group', 'getResourceGroup', { name: 'nope' }, OPERATOR, S.NOT_FOUND, 'NOT_FOUND'],
      [
        'delete a missing host',
        'deleteManagedResource',
        { name: 'nope' },
        OPERATOR,
        5,
        'NOT_FOUND',
      ],
      [
        "change a group's network",
        'applyResourceGroup',
        { name: 'group-a', spec: groupSpec('tenant-a', '10.11.0.0/24', '10.11.0.1') },
        OPERATOR,
        S.FAILED_PRECONDITION,
        'CONFLICT',
      ],
      [
        'a NAT IP another host holds',
        'applyManagedResource',
        {
          name: 'host-2',
          spec: {
            ...hostMessage('group-a', 'dpu-2', 2, { hostAccess: 'HOST_ACCESS_FABRIC_ACCESS' }),
            dpu: { id: 'dpu-2', ips: ['172.18.0.12', '172.18.0.111'] },
          },
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
      const info = statusDetailsOf(answer.error?.metadata).errorInfo
      t.match(info, { reason: code, domain: 'hydrazine.dev' }, `${name}: ErrorInfo`)
      t.ok(answer.error?.details, `${name}: a message`)
      t.same(await snapshot(p), before, `${name}: nothing changed`)
    }

    const invalid = await call('applyResourceGroup', { name: 'group-c', spec: bad })
    const paths = ['spec.network.cidr', 'spec.network.gateway', 'spec.tenant_id']
    t.same([...new Set(violationsOf(invalid))].sort(), paths, 'BadRequest names every field')
    t.same(
      [...new Set(issuesOf(invalid).map((i: { path: string }) => i.path))].sort(),
      paths,
      'so does hz-issues',
    )
    for (const path of paths) t.match(invalid.error?.details, path, `the message names ${path}`)
    const subnet = await call('applyResourceGroup', {
      name: 'group-c',
      spec: { ...groupSpec(), extraSubnets: [{ cidr: '10.9.0.0/24', gateway: '10.8.0.1' }] },
    })
    t.same(violationsOf(subnet), ['spec.extra_subnets[0].gateway'], 'list items by index')
    t.same(violationsOf(await call('applyResourceGroup', { name: 'group-c' })), ['spec'])
    t.same(violationsOf(await call('applyResourceGroup', { name: 'X', spec: groupSpec() })), [
      'name',
    ])
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
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.getResourceGroup({ name: 'group-a' }, metadataOf(OPERATOR), (e) => resolve(e)),
    )
    t.equal(error?.code, grpc.status.INTERNAL)
    t.equal(error?.details, 'internal error', 'no internals in the answer')
    t.same(statusDetailsOf(error?.metadata), {}, 'no details either')
    t.equal(logged.length, 1, 'the cause was logged')
  })

  t.test('delete: the host, then the group', async (t) => {
    const host = await call('deleteManagedResource', { name: 'host-1' }, TENANT_A)
    t.equal(host.error, undefined)
    t.ok(host.res.managedResource.deletion.requestedAt, 'deletion recorded')
    t.ok(host.res.jobId)
    const group = await call('deleteResourceGroup', { name: 'group-a', force: true })
    t.equal(group.res.resourceGroup.deletion.force, true)
    await until(
      async () => (await call('getResourceGroup', { name: 'group-a' })).error?.code,
      (code) => code === grpc.status.NOT_FOUND,
    )
  })
})

/**
 * The DNS fields on both APIs: a group's `dns` (`{enabled?}`) and a host's `hostname`
 * (its name in its group's DNS) are stored and shown as given, over HTTP and gRPC alike;
 * a bad value is a 400 / INVALID_ARGUMENT naming the field, and a DNS name another host
 * of the group has is a 409 / FAILED_PRECONDITION, whichever API asked.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import { createApp } from '../../api/http/app.ts'
import { TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, startPipeline, until } from '../pipeline/fixtures.ts'
import { hostMessage, OPERATOR, startIngress } from './grpc-fixture.ts'

t.test('dns and hostname over HTTP and gRPC', async (t) => {
  const p = await startPipeline(t, { dnsZone: 'hydrazine.test' })
  await p.agent('dpu-1')
  const app = createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } })
  const http = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: {
        authorization: `Bearer ${OPERATOR}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
    return { status: res.status, json: (await res.json()) as any }
  }
  const { call } = await startIngress(t, p)

  await t.test('HTTP: stored and shown as given; refusals name the field', async (t) => {
    const group = { ...groupSpec('tenant-a'), dns: { enabled: true } }
    t.equal((await http('PUT', '/v1/resource-groups/group-a', group)).status, 202)
    await until(
      () => p.controller.store.groups.get('group-a'),
      (g) => g?.status.phase === 'Ready',
    )
    t.same((await http('GET', '/v1/resource-groups/group-a')).json.spec.dns, { enabled: true })
    const put = await http('PUT', '/v1/managed-resources/h1', {
      ...hostSpec('group-a', 'dpu-1', 1),
      hostname: 'web',
    })
    t.equal(put.status, 202)
    t.equal(put.json.object.spec.hostname, 'web')

    const refusals: [string, string, unknown, number, string, RegExp][] = [
      [
        'dns.enabled not a boolean',
        '/v1/resource-groups/group-x',
        { ...groupSpec('tenant-a'), dns: { enabled: 'yes' } },
        400,
        'dns.enabled',
        /boolean/,
      ],
      [
        'an unknown dns field',
        '/v1/resource-groups/group-x',
        { ...groupSpec('tenant-a'), dns: { zone: 'x.test' } },
        400,
        'dns.zone',
        /.+/,
      ],
      [
        'a hostname that is no DNS label',
        '/v1/managed-resources/h2',
        { ...hostSpec('group-a', 'dpu-1', 2), hostname: 'Web_1' },
        400,
        'hostname',
        /RFC 1123 label/,
      ],
      [
        "another host's DNS name in the group",
        '/v1/managed-resources/h2',
        { ...hostSpec('group-a', 'dpu-1', 2), hostname: 'web' },
        409,
        '',
        /DNS name web\.group-a is already in use/,
      ],
    ]
    for (const [name, path, body, status, field, message] of refusals) {
      const answer = await http('PUT', path, body)
      t.equal(answer.status, status, `${name}: ${status}`)
      if (field) {
        t.match(answer.json.error.issues, [{ path: field, message }], `${name}: names ${field}`)
      } else t.match(answer.json.error.message, message, `${name}: says why`)
    }
    t.equal((await http('GET', '/v1/managed-resources/h2')).status, 404, 'nothing stored')
  })

  await t.test('gRPC: the same fields, typed; the same refusals', async (t) => {
    const off = await call('applyResourceGroup', {
      name: 'group-b',
      spec: { ...groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'), dns: { enabled: false } },
    })
    t.equal(off.error, undefined)
    t.match(off.res.resourceGroup.spec.dns, { enabled: false })
    t.same((await p.controller.store.groups.get('group-b'))?.spec.dns, { enabled: false })
    const unset = await call('getResourceGroup', { name: 'group-a' })
    t.match(unset.res.resourceGroup.spec.dns, { enabled: true }, 'HTTP-stored dns reads back')

    const named = await call('applyManagedResource', {
      name: 'h3',
      spec: hostMessage('group-a', 'dpu-1', 3, { hostname: 'db' }),
    })
    t.equal(named.error, undefined)
    t.equal(named.res.managedResource.spec.hostname, 'db')
    t.equal(
      (await call('getManagedResource', { name: 'h1' })).res.managedResource.spec.hostname,
      'web',
    )

    const bad = await call('applyManagedResource', {
      name: 'h4',
      spec: hostMessage('group-a', 'dpu-1', 4, { hostname: 'no.dots' }),
    })
    t.equal(bad.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(
      statusDetailsOf(bad.error?.metadata).badRequest?.fieldViolations.map((v) => v.field),
      ['spec.hostname'],
      'the violation names spec.hostname',
    )
    const taken = await call('applyManagedResource', {
      name: 'h4',
      spec: hostMessage('group-a', 'dpu-1', 4, { hostname: 'db' }),
    })
    t.equal(taken.error?.code, grpc.status.FAILED_PRECONDITION)
    t.match(taken.error?.details, /DNS name db\.group-a is already in use/)
    // The same name in another group is that group's own.
    const other = await call('applyManagedResource', {
      name: 'h5',
      spec: hostMessage('group-b', 'dpu-2', 5, { hostname: 'db' }),
    })
    t.equal(other.error, undefined, 'db in group-b is free')
  })
})

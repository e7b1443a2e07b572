/**
 * `GET /v1/trace` against a running pipeline with one OVN central per group: ovn-trace
 * runs in the source group's own central, on the topology the handlers compiled, with
 * ports bound by the stand-in chassis of the in-process agents.
 *
 * group-a (tenant-a, 10.10.10.0/24): a1 PublicAccess on dpu-1, a2 FabricAccess on dpu-2,
 * a3 on dpu-2. group-b (tenant-b, the same CIDR): b1 and b2 on dpu-3.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import { createApp } from '../../api/http/app.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { jsonCaller } from '../helpers/http.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from '../pipeline/fixtures.ts'
import { startPipelineFrr } from '../pipeline/scenarios.ts'
import { startIngress } from './grpc-fixture.ts'

const run = promisify(execFile)
const PUBLIC_IP = '203.0.113.7'
const FABRIC_GATEWAY = '172.18.0.1'

function api(p: Pipeline) {
  const app = createApp({
    readiness: {},
    v1: {
      client: p.client,
      tokens: TEST_TOKENS,
    },
  })
  const call = jsonCaller(app, OPERATOR)
  return (query: string, token = OPERATOR) => call('GET', `/v1/trace?${query}`, undefined, token)
}

/** Applies the host and waits for it to be Ready; resolves it as stored. */
async function readyHost(
  p: Pipeline,
  name: string,
  spec: Record<string, unknown>,
): Promise<ManagedResource> {
  await p.client.applyHost(name, spec)
  const host = await until(
    () => p.controller.store.hosts.get(name),
    (h) => h?.status.phase === 'Ready',
    60_000,
  )
  if (!host) throw new Error(`${name} did not become Ready`)
  return host
}

const ipOf = (h: ManagedResource) => h.status.hostAccessIPs?.hostIP ?? ''

t.test('GET /v1/trace', async (t) => {
  const p = await startPipeline(t, { perGroup: true, frr: true })
  await startPipelineFrr(t, p)
  for (const dpu of ['dpu-1', 'dpu-2', 'dpu-3']) await p.agent(dpu)
  await p.client.registerPublicIp(PUBLIC_IP)
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  await p.client.applyGroup('group-b', groupSpec('tenant-b'))
  const a1 = await readyHost(
    p,
    'a1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'PublicAccess' }),
  )
  const a2 = await readyHost(
    p,
    'a2',
    hostSpec('group-a', 'dpu-2', 2, { hostAccess: 'FabricAccess' }),
  )
  const a3 = await readyHost(p, 'a3', hostSpec('group-a', 'dpu-2', 3))
  const b1 = await readyHost(p, 'b1', hostSpec('group-b', 'dpu-3', 4))
  const b2 = await readyHost(p, 'b2', hostSpec('group-b', 'dpu-3', 5))
  const centralOf = async (group: string) => {
    const c = await p.centrals?.ensure(group)
    if (!c) throw new Error(`no central for ${group}`)
    return c
  }
  const centralA = await centralOf('group-a')
  const centralB = await centralOf('group-b')
  const macBindings = async () =>
    Promise.all(
      [centralA, centralB].map(
        async (c) =>
          (await run('ovn-sbctl', [`--db=${c.sbController}`, '--bare', 'list', 'MAC_Binding']))
            .stdout,
      ),
    )
  const before = await macBindings()
  const call = api(p)

  await t.test('a host to another host of its group: delivered to that host', async (t) => {
    for (const to of ['a2', ipOf(a2)]) {
      const { status, json } = await call(`from=a1&to=${to}`)
      t.equal(status, 200, `to=${to}`)
      t.equal(json.verdict, 'delivered')
      t.same(json.delivered, {
        port: topologyNames.hostPort('group-a', 'a2'),
        host: 'a2',
        group: 'group-a',
      })
      t.match(json.from, {
        host: 'a1',
        port: topologyNames.hostPort('group-a', 'a1'),
        ip: ipOf(a1),
        mac: a1.spec.hostMAC,
        boundTo: 'dpu-1',
      })
      t.equal(json.traces[0].central, centralA.service, "traced in group-a's central")
      t.match(json.traces[0].flow, `eth.dst == ${a2.spec.hostMAC} `, "sent to a2's own MAC")
      t.match(json.summary, /reaches host a2 of group group-a/)
    }
    const tcp = await call('from=a1&to=a2&proto=tcp&port=22&raw=true')
    t.equal(tcp.json.verdict, 'delivered', 'a TCP SYN is delivered too')
    t.match(tcp.json.traces[0].flow, /tcp\.dst == 22/)
    t.match(tcp.json.traces[0].raw, /^# tcp,/, 'raw=true carries the ovn-trace output')
    t.notOk((await call('from=a1&to=a2')).json.traces[0].raw, 'and only then')
  })

  await t.test("group-b's host to group-a's address stays in group-b", async (t) => {
    t.equal(ipOf(b2), ipOf(a2), 'precondition: b2 and a2 share an address')
    t.notOk([ipOf(b1), ipOf(b2)].includes(ipOf(a3)), 'precondition: no host of group-b has a3s')
    const shared = await call(`from=b1&to=${ipOf(a2)}`)
    t.equal(shared.status, 200)
    t.equal(shared.json.verdict, 'delivered', "it reaches group-b's own host with that address")
    t.equal(shared.json.delivered?.port, topologyNames.hostPort('group-b', 'b2'))
    t.equal(shared.json.traces[0].central, centralB.service, "traced in group-b's central")
    t.match(shared.json.notes, [
      /also host a2's address in group group-a; .*never enters group group-a/,
    ])
    t.notMatch(shared.json.hops.join('\n'), /group-a/, 'no hop is in group-a')

    const only = await call(`from=b1&to=${ipOf(a3)}`)
    t.equal(only.json.verdict, 'unresolved', 'nothing in group-b has the address')
    t.same(only.json.unresolved?.target, ipOf(a3))
    t.equal(only.json.unresolved?.datapath, topologyNames.switch('group-b'))
    t.match(only.json.summary, /is never sent: nothing on group group-b network .* answers the ARP/)
    t.match(only.json.notes, [/never enters group group-a/])
    t.notMatch(JSON.stringify(only.json.unresolved?.reached), /group-a/)
    const tenant = await call(`from=b1&to=${ipOf(a3)}`, TENANT_B)
    t.equal(tenant.json.verdict, 'unresolved', 'the same for group-b tenant')
    t.same(tenant.json.notes, [], "without naming another tenant's group")
  })

  await t.test('a host to its gateway: the router answers', async (t) => {
    const { json } = await call('from=a1&to=10.10.10.1')
    t.equal(json.verdict, 'answered')
    t.same(json.answered, { router: topologyNames.router('group-a') })
  })

  await t.test('a host to a host of another group: through the fabric', async (t) => {
    const { json } = await call('from=b1&to=a1')
    t.same(json.to, { ip: PUBLIC_IP, host: 'a1', group: 'group-a' }, "at a1's public IP")
    t.equal(json.verdict, 'leaves')
    t.match(json.leaves, { dpu: 'dpu-3', source: dpuFabricIps('dpu-3')[1] })
    const unreachable = await call('from=a1&to=b1')
    t.equal(unreachable.status, 400, 'a host with hostAccess None is not reachable from outside')
    t.match(unreachable.json.error.issues, [{ path: 'to', message: /hostAccess None/ }])
  })

  await t.test('a host to the outside leaves through its own DPU, SNATed', async (t) => {
    const a = await call('from=a1&to=198.51.100.9')
    t.equal(a.json.verdict, 'leaves')
    t.same(a.json.leaves, {
      port: topologyNames.localnetPort('group-a', 'dpu-1'),
      dpu: 'dpu-1',
      source: PUBLIC_IP,
      arp: { target: FABRIC_GATEWAY, port: topologyNames.localnetPort('group-a', 'dpu-1') },
    })
    const fabric = await call('from=a2&to=198.51.100.9')
    t.match(fabric.json.leaves, { dpu: 'dpu-2', source: dpuFabricIps('dpu-2')[1] })
  })

  await t.test('from the fabric to a public or NAT IP reaches its host', async (t) => {
    const pub = await call(`from=fabric&to=${PUBLIC_IP}`)
    t.equal(pub.status, 200)
    t.equal(pub.json.verdict, 'delivered')
    t.same(pub.json.delivered, {
      port: topologyNames.hostPort('group-a', 'a1'),
      host: 'a1',
      group: 'group-a',
    })
    t.match(pub.json.from, { fabric: true, dpu: 'dpu-1' })
    t.equal(pub.json.traces.length, 2, 'into the gateway router, then on from its DNAT')
    t.match(pub.json.hops, [/DPU dpu-1 localnet port/])
    t.ok(
      pub.json.hops.some((h: string) => h.includes(`destination becomes ${ipOf(a1)} (DNAT`)),
      'the DNAT is a hop',
    )
    const nat = await call(`from=fabric&to=${dpuFabricIps('dpu-2')[1]}`, TENANT_A)
    t.equal(nat.json.delivered?.host, 'a2', "the FabricAccess host, at its DPU's NAT IP")
    t.equal((await call('from=fabric&to=192.0.2.77')).status, 404, 'an address no host owns')
  })

  await t.test('a tenant traces only its own hosts', async (t) => {
    const cases: [string, string, string, number, string][] = [
      ['its own hosts', 'from=a1&to=a2', TENANT_A, 200, ''],
      ["another tenant's host as the source", 'from=a1&to=a2', TENANT_B, 404, 'TRACE_UNKNOWN_HOST'],
      [
        "another tenant's host as the destination",
        'from=a1&to=b1',
        TENANT_A,
        404,
        'TRACE_UNKNOWN_HOST',
      ],
      [
        "another tenant's public IP",
        `from=fabric&to=${PUBLIC_IP}`,
        TENANT_B,
        404,
        'TRACE_UNKNOWN_ADDRESS',
      ],
    ]
    for (const [name, query, token, status, code] of cases) {
      const res = await call(query, token)
      t.equal(res.status, status, name)
      if (code) t.equal(res.json.error.code, code, name)
    }
    const refused = await call('from=a1&to=a2', TENANT_B)
    t.equal(refused.json.error.message, 'from: host a1 does not exist', 'as if it did not exist')
  })

  await t.test('a host with no logical port yet cannot be traced (409)', async (t) => {
    await p.client.applyHost('a4', hostSpec('group-a', 'dpu-1', 6, { hostIP: '192.168.9.9' }))
    await until(
      () => p.controller.store.hosts.get('a4'),
      (h) => h?.status.phase === 'Failed',
    )
    const res = await call('from=a4&to=a1')
    t.equal(res.status, 409)
    t.equal(res.json.error.code, 'TRACE_NOT_ATTACHED')
  })

  await t.test('the Trace RPC answers the same, typed', async (t) => {
    const g = await startIngress(t, p)
    const { res } = await g.call('trace', { from: 'a1', to: 'a2' })
    t.equal(res?.verdict, 'TRACE_VERDICT_DELIVERED')
    t.equal(res?.host, 'a2')
    t.equal(res?.port, topologyNames.hostPort('group-a', 'a2'))
    t.equal(res?.runs?.[0]?.raw, '', 'no raw output unless asked')
    const raw = await g.call('trace', { from: 'a1', to: 'a2', raw: true })
    t.match(raw.res?.runs?.[0]?.raw, /ingress/, 'the raw ovn-trace output on request')
    const out = await g.call('trace', {
      from: 'a1',
      to: '8.8.8.8',
      protocol: 'TRACE_PROTOCOL_TCP',
      port: 443,
    })
    t.equal(out.res?.verdict, 'TRACE_VERDICT_LEAVES')
    t.equal(out.res?.source, PUBLIC_IP, 'leaves as its public IP')
    const stranger = await g.call('trace', { from: 'a1', to: 'a2' }, TENANT_B)
    t.equal(stranger.error?.code, grpc.status.NOT_FOUND, "another tenant's host")
    const bad = await g.call('trace', { from: 'a1', to: 'a2', port: 80 })
    t.equal(bad.error?.code, grpc.status.INVALID_ARGUMENT)
    t.same(
      statusDetailsOf(bad.error?.metadata).badRequest?.fieldViolations.map((v) => v.field),
      ['port'],
      'a port without TCP or UDP is named',
    )
  })

  await t.test('bad parameters are refused, each named', async (t) => {
    const cases: [string, string][] = [
      ['to=a2', 'from'],
      ['from=a1', 'to'],
      ['from=a1&to=not_a_host!', 'to'],
      ['from=Bad_Host&to=a2', 'from'],
      ['from=a1&to=a2&proto=sctp', 'proto'],
      ['from=a1&to=a2&proto=tcp', 'port'],
      ['from=a1&to=a2&proto=tcp&port=70000', 'port'],
      ['from=a1&to=a2&proto=udp&port=x', 'port'],
      ['from=a1&to=a2&port=80', 'port'],
      ['from=a1&to=a2&raw=maybe', 'raw'],
      ['from=a1&to=a2&prot=tcp', 'prot'],
      ['from=a1&from=a2&to=a3', 'from'],
      ['from=fabric&to=a1', 'to'],
      [`from=a1&to=${ipOf(a1)}`, 'to'],
      ['from=a1&to=fd00::1', 'to'],
    ]
    for (const [query, param] of cases) {
      const res = await call(query)
      t.equal(res.status, 400, query)
      t.equal(res.json.error.code, 'INVALID', query)
      t.same(
        res.json.error.issues.map((i: { path: string }) => i.path),
        [param],
        `${query} names ${param}`,
      )
    }
  })

  t.same(await macBindings(), before, 'no trace wrote a MAC_Binding (nor anything) to the SB')
})

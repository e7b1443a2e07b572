/**
 * The controller's metrics as Prometheus scrapes them, after real work through the
 * pipeline (Redis, OVN central, FRR, in-process agents), compared with what the HTTP API
 * reports; and the queue dashboard's access rule.
 */
import { Registry } from 'prom-client'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { announcedCollector, ingressInstruments } from '../../infra/metrics/service.ts'
import { serveMetrics } from '../../lib/metrics/server.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { jsonCaller } from '../helpers/http.ts'
import { type Sample, sampleValue, scrape } from '../helpers/metrics.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { runReconcile, startPipelineFrr } from './scenarios.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT = 'tenant-a-token-0123456789abcdef'
const tokens = { operator: [OPERATOR], tenants: { 'tenant-a': [TENANT] } }

t.test('a scrape after attaching hosts matches what the API reports', async (t) => {
  const registry = new Registry()
  const p = await startPipeline(t, { frr: true, metrics: registry })
  const frr = await startPipelineFrr(t, p)
  // What infra/service.ts adds beside the controller's own metrics.
  announcedCollector(registry, () => frr.announced())
  const ingress = ingressInstruments(registry)
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens },
    dashboard: { tokens, queues: () => p.controller.queues() },
    observeRequest: ingress.httpRequest,
  })
  const metrics = await serveMetrics({ registry, listen: { host: '127.0.0.1', port: 0 } })
  t.teardown(() => metrics.close())

  const call = jsonCaller(app, OPERATOR)

  await p.agent('dpu-1', { protocolVersions: ['1.0', '2.0'] })
  await p.agent('dpu-2')
  await p.agent('dpu-3')
  for (const ip of ['203.0.113.7', '203.0.113.8']) {
    t.equal((await call('PUT', `/v1/public-ips/${ip}`)).status, 200)
  }
  t.equal((await call('PUT', '/v1/resource-groups/group-a', groupSpec())).status, 202)
  const hosts = [
    ['host-1', hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess' })],
    ['host-2', hostSpec('group-a', 'dpu-2', 2)],
    ['host-3', hostSpec('group-a', 'dpu-3', 3, { hostAccess: 'PublicAccess' })],
  ] as const
  for (const [name, spec] of hosts) {
    t.equal((await call('PUT', `/v1/managed-resources/${name}`, spec)).status, 202)
  }
  for (const [name] of hosts) {
    await until(
      async () => (await call('GET', `/v1/managed-resources/${name}`)).json,
      (h) => h?.status?.phase === 'Ready',
    )
  }
  t.equal((await call('GET', '/v1/managed-resources', undefined, 'not-a-token')).status, 401)

  const listed = (await call('GET', '/v1/managed-resources?resourceGroup=group-a')).json
  const hostIps = listed.items.map(
    (h: { status: { hostAccessIPs?: { hostIP?: string } } }) => h.status.hostAccessIPs?.hostIP,
  )
  const publicIps: { allocated: boolean }[] = (await call('GET', '/v1/public-ips')).json.items
  const samples = await scrape(metrics.url)
  const value = (name: string, labels?: Record<string, string>) =>
    sampleValue(samples, name, labels)

  t.test('request → Ready: one observation per host that turned Ready', async (t) => {
    t.equal(value('hydrazine_host_ready_seconds_count'), hosts.length)
    t.ok((value('hydrazine_host_ready_seconds_sum') ?? 0) > 0, 'it took some time')
    t.equal(value('hydrazine_host_ready_seconds_bucket', { le: '+Inf' }), hosts.length)
  })

  t.test('job duration histograms and outcomes, by job name', async (t) => {
    const attached = { job: 'host.attach', outcome: 'completed' }
    t.equal(value('hydrazine_job_duration_seconds_count', attached), hosts.length)
    t.equal(value('hydrazine_jobs_total', attached), hosts.length, 'outcomes count the same runs')
    t.ok((value('hydrazine_job_duration_seconds_sum', attached) ?? 0) > 0)
    t.ok((value('hydrazine_jobs_total', { job: 'group.create', outcome: 'completed' }) ?? 0) >= 1)
    t.ok(
      (value('hydrazine_jobs_total', { job: 'host.attach', outcome: 'waiting' }) ?? 0) >= 1,
      'an attach parks while its agent acks',
    )
  })

  t.test("IPAM gauges are the API's numbers", async (t) => {
    const network = { network: 'group-a' }
    t.equal(hostIps.filter(Boolean).length, hosts.length, 'the API names each host IP')
    t.equal(value('hydrazine_ipam_pool_used_addresses', network), hostIps.length)
    t.equal(value('hydrazine_ipam_pool_size_addresses', network), 254, '10.10.10.1-254')
    // Free: the pool less the hosts' addresses and the gateway (never handed out).
    t.equal(value('hydrazine_ipam_pool_free_addresses', network), 254 - hostIps.length - 1)

    const free = publicIps.filter((ip) => !ip.allocated).length
    t.equal(publicIps.length, 2)
    t.equal(free, 1, 'the API shows one public IP free')
    t.equal(value('hydrazine_public_ip_pool_size_addresses'), publicIps.length)
    t.equal(value('hydrazine_public_ip_pool_free_addresses'), free)
    t.equal(value('hydrazine_public_ip_pool_used_addresses'), publicIps.length - free)
  })

  t.test('announced /32s, NB transactions, queues, heartbeats', async (t) => {
    t.equal(value('hydrazine_frr_announced_prefixes'), 1, "host-3's public IP")
    const nb = { central: p.nb, outcome: 'ok' }
    t.ok((value('hydrazine_nb_transaction_duration_seconds_count', nb) ?? 0) > 0)
    for (const queue of ['hydrazine', 'frr', 'agent-dpu-1', 'agent-dpu-3']) {
      for (const state of ['waiting', 'active', 'delayed', 'failed']) {
        t.type(value('hydrazine_queue_jobs', { queue, state }), 'number', `${queue} ${state}`)
      }
    }
    t.equal(value('hydrazine_queue_jobs', { queue: 'hydrazine', state: 'failed' }), 0)
    const age = value('hydrazine_dpu_heartbeat_age_seconds', { dpu: 'dpu-1' }) ?? -1
    t.ok(age >= 0 && age < 60, `dpu-1 beat ${age} s ago`)
  })

  t.test('HTTP requests by matched route and status, never the raw URL', async (t) => {
    const put = { method: 'PUT', route: '/v1/managed-resources/:name', status: '202' }
    t.equal(value('hydrazine_http_requests_total', put), hosts.length)
    const refused = { method: 'GET', route: '/v1/managed-resources', status: '401' }
    t.equal(value('hydrazine_http_requests_total', refused), 1)
    t.notOk(
      samples.some((s: Sample) => s.labels.route?.includes('host-1')),
      'no object name in a label',
    )
  })

  t.test('reconcile repairs are counted by kind', async (t) => {
    await p.nbctl(
      'lr-nat-del',
      topologyNames.gatewayRouter('group-a', 'dpu-1'),
      'dnat_and_snat',
      '172.18.0.111',
    )
    const report = await runReconcile(p, 'reconcile-metrics')
    t.same(report.repaired, ['group-a'])
    const after = await scrape(metrics.url)
    t.equal(sampleValue(after, 'hydrazine_reconcile_repairs_total', { kind: 'nb_drift' }), 1)
    t.equal(
      sampleValue(after, 'hydrazine_jobs_total', { job: 'reconcile', outcome: 'completed' }),
      1,
    )
  })

  t.test('the queue dashboard: operators only', async (t) => {
    const page = (token?: string) =>
      app.request('/admin/queues', token ? { headers: { authorization: `Bearer ${token}` } } : {})
    const operator = await page(OPERATOR)
    t.equal(operator.status, 200, 'an operator token gets the page')
    t.match(operator.headers.get('content-type'), /text\/html/)
    const html = await operator.text()
    t.match(html, /<title>Hydrazine queues<\/title>/)
    const script = /src="(static\/js\/[^"]+\.js)"/.exec(html)?.[1]
    const asset = await app.request(`/admin/queues/${script}`, {
      headers: { authorization: `Bearer ${OPERATOR}` },
    })
    t.equal(asset.status, 200, `its ${script} is served`)
    t.match(asset.headers.get('content-type'), /javascript/)
    t.equal((await app.request(`/admin/queues/${script}`)).status, 401, 'to operators only')
    t.equal((await page(TENANT)).status, 403, 'a tenant token is forbidden')
    const none = await page()
    t.equal(none.status, 401, 'no token is unauthenticated')
    t.match(none.headers.get('www-authenticate'), /^Bearer/)

    const api = await app.request('/admin/queues/api/queues', {
      headers: { authorization: `Bearer ${OPERATOR}` },
    })
    t.equal(api.status, 200)
    // Shown without the hash tag their Redis keys carry (`lib/redis/slots.ts`).
    const names = ((await api.json()) as { queues: { displayName: string }[] }).queues.map(
      (q) => q.displayName,
    )
    t.same(names.sort(), ['agent-dpu-1', 'agent-dpu-2', 'agent-dpu-3', 'frr', 'hydrazine'])
    const tenantApi = await app.request('/admin/queues/api/queues', {
      headers: { authorization: `Bearer ${TENANT}` },
    })
    t.equal(tenantApi.status, 403, "a tenant cannot read the dashboard's API either")
  })
})

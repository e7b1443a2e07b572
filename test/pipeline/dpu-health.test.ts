/**
 * `dpu.health` on real Redis and OVN, with an in-process agent answering `dpu-1`'s queue
 * and a heartbeat this test writes as the agent's runtime would (1 s interval): so the
 * test decides when the agent goes silent, and what its DPU holds bound (a simulated DPU:
 * what `configure` bound and `isolate` did not remove, minus what the test deletes "by
 * hand").
 *
 * - A silent DPU: its hosts keep their phase and carry `DpuHealthy=False HeartbeatLost`
 *   within 3 intervals of its last beat; a host attached meanwhile gets it too; the DPU
 *   stays listed (`Lost`, last heartbeat) after its heartbeat key expired; once heard
 *   from again, `DpuHealthy=True HeartbeatResumed`. Each change is an event.
 * - A host port the DPU lost: the host goes back to Configuring (`PortLost`), a new
 *   `configure` job rebinds it, it is Ready again, the repair is in its events, and it
 *   is not repeated. A port nothing wants: one `isolate` with a repair id; one the DPU
 *   keeps holding is isolated again only after the grace, never on every run. Ports the
 *   DPU reports off the host ports its inventory gives it are no repairs.
 */
import type { Job } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../../lib/agent-protocol/index.ts'
import type { Condition } from '../../lib/model/objects.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  type TestAgent,
  until,
} from './fixtures.ts'
import { startScheduledController } from './scenarios.ts'

const INTERVAL_MS = 1000
const OPERATOR = 'operator-token-0123456789abcdef'
type BoundPort = Heartbeat['observed']['boundPorts'][number]
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** The DPU as its agent would report it: what `configure` bound and `isolate` removed. */
class SimulatedDpu {
  readonly bound = new Map<string, BoundPort>()
  #seen = 0
  /** Logical ports whose `isolate` this DPU ignores (a port it keeps holding). */
  readonly stubborn = new Set<string>()

  constructor(private readonly agent: TestAgent) {}

  /** Applies the jobs the agent ran since the last look. */
  sync(): BoundPort[] {
    for (; this.#seen < this.agent.jobs.length; this.#seen++) {
      const job = this.agent.jobs[this.#seen] as Job
      const data = job.data as { host: { logicalPort: string }; group: { name: string } }
      const lp = data.host.logicalPort
      if (job.name === 'configure') {
        this.bound.set(lp, {
          port: `p${this.bound.size}`,
          logicalPort: lp,
          group: data.group.name,
          ovnInstalled: true,
        })
      } else if (!this.stubborn.has(lp)) {
        this.bound.delete(lp)
      }
    }
    return [...this.bound.values()]
  }
}

/** Writes `dpu-1`'s heartbeat every 250 ms (as its agent would, 1 s interval) until stopped. */
function beating(redis: Redis, dpu: SimulatedDpu) {
  const beats = new Heartbeats(redis)
  let last = ''
  const beat = async () => {
    const at = new Date().toISOString()
    await beats.write(
      {
        dpuId: 'dpu-1',
        agentVersion: '0.0.0-test',
        protocolVersions: ['1.0', '2.0'],
        fabricIps: [],
        at,
        intervalMs: INTERVAL_MS,
        observed: {
          chassis: 'dpu-1',
          bridges: ['br-int'],
          ovnRemote: null,
          ovnController: { running: true, connected: true },
          boundPorts: dpu.sync(),
          relays: [],
        },
      },
      3 * INTERVAL_MS,
    )
    last = at
  }
  let timer: NodeJS.Timeout | undefined
  let inFlight: Promise<void> = Promise.resolve()
  return {
    async start() {
      await beat()
      timer = setInterval(() => {
        inFlight = beat()
      }, 250)
    },
    /** Stops beating; resolves with the last beat's time (a beat under way included). */
    async stop(): Promise<string> {
      clearInterval(timer)
      await inFlight.catch(() => undefined)
      return last
    },
  }
}

async function startHealth(p: Pipeline) {
  await p.controller.queue.upsertJobScheduler(
    'dpu.health',
    { every: 250 },
    { name: 'dpu.health', data: {}, opts: { removeOnComplete: { count: 10 } } },
  )
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens: { operator: [OPERATOR], tenants: {} } },
  })
  const get = async (path: string): Promise<unknown> =>
    (await app.request(path, { headers: { authorization: `Bearer ${OPERATOR}` } })).json()
  return {
    get,
    dpu: async (id: string) => (await get(`/v1/dpus/${id}`)) as DpuBody,
    events: async (path: string) => ((await get(`${path}/events`)) as { items: EventBody[] }).items,
  }
}

/** What the API answers, as far as these tests look. */
interface DpuBody {
  readonly id?: string
  readonly state?: string
  readonly lastHeartbeat?: string
  readonly hosts?: string[]
}
interface EventBody {
  readonly reason: string
  readonly message: string
}

const dpuHealthy = (conditions: readonly Condition[] | undefined) =>
  conditions?.find((c) => c.type === 'DpuHealthy')

async function readyHost(p: Pipeline, name: string, n: number) {
  await p.client.applyHost(name, hostSpec('group-a', 'dpu-1', n))
  return until(
    () => p.controller.store.hosts.get(name),
    (h) => h?.status.phase === 'Ready',
  )
}

t.test("a silent DPU's hosts say so, and say so again when it is back", async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-1')
  const dpu = new SimulatedDpu(agent)
  const redis = new Redis(p.redisUrl)
  t.teardown(() => redis.disconnect())
  const heart = beating(redis, dpu)
  t.teardown(() => heart.stop())
  await heart.start()
  await p.client.applyGroup('group-a', groupSpec())
  await readyHost(p, 'host-1', 1)
  const api = await startHealth(p)

  const online = await until(
    () => api.dpu('dpu-1'),
    (d) => d.state === 'Online',
  )
  t.match(online, { id: 'dpu-1', state: 'Online', hosts: ['host-1'] }, 'Online, serving host-1')
  t.ok(online.lastHeartbeat, 'with its last heartbeat')

  const lastBeat = await heart.stop()
  const lost = await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => dpuHealthy(h?.status.conditions)?.status === 'False',
    10_000,
  )
  const condition = dpuHealthy(lost?.status.conditions)
  t.match(condition, {
    status: 'False',
    reason: 'HeartbeatLost',
    message: new RegExp(`since ${lastBeat}`),
  })
  const after = Date.parse(condition?.lastTransitionTime ?? '') - Date.parse(lastBeat)
  t.ok(after <= 3 * INTERVAL_MS, `DpuHealthy=False ${after} ms after the last beat (≤ 3 intervals)`)
  t.equal(lost?.status.phase, 'Ready', 'the host keeps its phase: its data plane still works')

  await until(
    () => new Heartbeats(redis).read('dpu-1'),
    (b) => b === undefined,
    10_000,
  )
  t.match(
    await api.get('/v1/dpus'),
    { items: [{ id: 'dpu-1', state: 'Lost', lastHeartbeat: lastBeat, hosts: ['host-1'] }] },
    'its heartbeat key expired: still listed, Lost, with its last heartbeat',
  )

  await t.test('a host attached to the Lost DPU gets the condition too', async (t) => {
    const host2 = await readyHost(p, 'host-2', 2)
    const marked = await until(
      () => p.controller.store.hosts.get('host-2'),
      (h) => dpuHealthy(h?.status.conditions)?.reason === 'HeartbeatLost',
      10_000,
    )
    t.ok(host2, 'host-2 is Ready (its agent still answers its queue)')
    t.equal(marked?.status.phase, 'Ready')
  })

  await heart.start()
  for (const name of ['host-1', 'host-2']) {
    const back = await until(
      () => p.controller.store.hosts.get(name),
      (h) => dpuHealthy(h?.status.conditions)?.status === 'True',
      10_000,
    )
    t.match(
      dpuHealthy(back?.status.conditions),
      { status: 'True', reason: 'HeartbeatResumed' },
      `${name}: DpuHealthy=True`,
    )
    t.equal(back?.status.phase, 'Ready')
  }
  t.match(await api.dpu('dpu-1'), { state: 'Online', hosts: ['host-1', 'host-2'] })

  const dpuEvents = (await api.events('/v1/dpus/dpu-1')).map((e) => e.reason)
  t.same(
    // Stale lasts half an interval: a loaded machine may not run in it.
    dpuEvents.filter((r) => r.startsWith('Heartbeat') && r !== 'HeartbeatStale'),
    ['HeartbeatResumed', 'HeartbeatLost', 'HeartbeatStarted'],
    "the DPU's events: each state change once, newest first",
  )
  const hostEvents = (await api.events('/v1/managed-resources/host-1')).map((e) => e.reason)
  t.ok(
    hostEvents.includes('HeartbeatLost') && hostEvents.includes('HeartbeatResumed'),
    `host-1's events: ${hostEvents}`,
  )
})

t.test('a port the DPU lost is bound again; a port nothing wants is isolated', async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-1')
  const dpu = new SimulatedDpu(agent)
  const redis = new Redis(p.redisUrl)
  t.teardown(() => redis.disconnect())
  const heart = beating(redis, dpu)
  t.teardown(() => heart.stop())
  await heart.start()
  await p.client.applyGroup('group-a', groupSpec())
  const ready = await readyHost(p, 'host-1', 1)
  const lp = ready?.status.logicalPortReference?.logicalPort ?? ''
  const api = await startHealth(p)
  const jobs = (name: string) => agent.jobs.filter((j) => j.name === name)

  // Past the grace (2 intervals): a DPU that holds what it should is left alone.
  await sleep(3 * INTERVAL_MS)
  t.equal(jobs('configure').length, 1, 'nothing to repair: one configure')
  t.equal(jobs('isolate').length, 0, 'and no isolate')

  await t.test('a host port deleted by hand', async (t) => {
    dpu.sync()
    dpu.bound.delete(lp)
    const redriven = await until(
      () => p.controller.store.hosts.get('host-1'),
      (h) => (h?.status.attempt ?? 1) > 1,
      10_000,
    )
    t.ok(redriven, 'the host starts a new attempt')
    const back = await until(
      () => p.controller.store.hosts.get('host-1'),
      (h) => h?.status.phase === 'Ready' && (h.status.attempt ?? 1) > 1,
      20_000,
    )
    t.equal(back?.status.attempt, 2, 'Ready again, on its second attempt')
    t.equal(jobs('configure').length, 2, 'its DPU was sent configure again')
    t.match(jobs('configure')[1]?.id, /-a2$/, 'as a new job (not deduplicated)')
    dpu.sync()
    t.ok(dpu.bound.has(lp), 'which bound the port again')
    const events = await api.events('/v1/managed-resources/host-1')
    t.ok(
      events.some((e) => e.reason === 'PortLost' && e.message.includes(lp)),
      `the repair is in host-1's events: ${events.map((e) => e.reason)}`,
    )
    t.ok(
      events.slice(0, 2).some((e) => e.reason === 'Ready'),
      'the newest: Ready again',
    )
    await sleep(3 * INTERVAL_MS)
    t.equal(jobs('configure').length, 2, 'repaired once, not again')
  })

  await t.test('a port nothing wants on the DPU', async (t) => {
    dpu.sync()
    const ghost = 'hz/group-a/ghost'
    dpu.bound.set(ghost, { port: 'pf9', logicalPort: ghost, group: 'group-a', ovnInstalled: true })
    // And one no isolate can be built for (not an interface name): it stalls nothing.
    const bogus = 'hz/group-a/bogus'
    dpu.bound.set(bogus, {
      port: 'not/a/port',
      logicalPort: bogus,
      group: 'group-a',
      ovnInstalled: true,
    })
    const isolated = await until(
      async () => jobs('isolate'),
      (j) => j.length > 0,
      10_000,
    )
    t.match(isolated[0]?.data, {
      dpuId: 'dpu-1',
      host: { name: 'ghost', logicalPort: ghost, hostPort: 'pf9' },
    })
    t.match(isolated[0]?.id, /^agent-isolate-dpu-1-ghost-v0-a\d+$/, 'with a repair id')
    await sleep(3 * INTERVAL_MS)
    t.equal(jobs('isolate').length, 1, 'the DPU let go of it: isolated once')
    t.notOk(dpu.bound.has(ghost))
    const runs = await p.controller.queue.getCompleted(0, -1)
    t.ok(
      runs.some((j) =>
        (j.returnvalue as { failed?: { error: string }[] } | undefined)?.failed?.some((f) =>
          f.error.startsWith(bogus),
        ),
      ),
      'the port no isolate can be built for is reported in the run',
    )
    const events = await api.events('/v1/dpus/dpu-1')
    t.ok(
      events.some((e) => e.reason === 'StrayPortIsolated'),
      "in the DPU's events",
    )

    // One the DPU keeps holding: isolated again after the grace, not on every run (250 ms).
    const kept = 'hz/group-a/kept'
    dpu.stubborn.add(kept)
    dpu.bound.set(kept, { port: 'pf8', logicalPort: kept, group: 'group-a', ovnInstalled: true })
    const kepts = () =>
      jobs('isolate').filter(
        (j) => (j.data as { host: { logicalPort: string } }).host.logicalPort === kept,
      )
    await until(
      async () => kepts().length,
      (n) => n >= 1,
      10_000,
    )
    await sleep(4 * INTERVAL_MS)
    const n = kepts().length
    t.ok(n >= 2 && n <= 3, `isolated again after the grace, not on every run: ${n} in ~4 s`)
    t.equal(new Set(kepts().map((j) => j.id)).size, n, 'each a job of its own')
  })
})

t.test(
  'ports a DPU makes up, off the host ports its inventory gives it, are no repairs',
  async (t) => {
    const p = await startPipeline(t)
    const agent = await p.agent('dpu-1')
    const dpu = new SimulatedDpu(agent)
    await p.client.applyDpu('dpu-1', { fabricIps: dpuFabricIps('dpu-1'), hostPorts: ['pf0hpf'] })
    const ghost = 'hz/group-a/ghost'
    dpu.bound.set(ghost, {
      port: 'pf0hpf',
      logicalPort: ghost,
      group: 'group-a',
      ovnInstalled: true,
    })
    for (let i = 0; i < 30; i++) {
      const lp = `hz/group-a/made-up-${i}`
      dpu.bound.set(lp, { port: `fake${i}`, logicalPort: lp, group: 'group-a', ovnInstalled: true })
    }
    const redis = new Redis(p.redisUrl)
    t.teardown(() => redis.disconnect())
    const heart = beating(redis, dpu)
    t.teardown(() => heart.stop())
    await heart.start()
    await startHealth(p)
    const isolated = () =>
      agent.jobs
        .filter((j) => j.name === 'isolate')
        .map((j) => (j.data as { host: { logicalPort: string } }).host.logicalPort)
    await until(
      async () => isolated(),
      (lps) => lps.includes(ghost),
      10_000,
    )
    await sleep(3 * INTERVAL_MS)
    t.same(isolated(), [ghost], 'only the stray on its own host port is isolated: no made-up one')
  },
)

t.test('the controller runs dpu.health when asked, keeping few of its results', async (t) => {
  const controller = await startScheduledController(t, {
    dpuHealthEveryMs: 50,
    prefix: 'hzhealth',
  })
  let runs = 0
  controller.worker.on('completed', (job) => {
    if (job.name === 'dpu.health') runs++
  })
  await until(
    async () => runs,
    (n) => n >= 30,
    30_000,
  )
  const kept = await controller.queue.getCompleted(0, -1)
  t.ok(
    kept.length > 0 && kept.length <= 10,
    `completed dpu.health jobs kept: ${kept.length} (at most 10)`,
  )
  t.match(
    kept[0]?.returnvalue,
    { dpus: [], conditions: [], repairs: [] },
    'a run reports what it did',
  )
})

t.test("a DPU's events belong to the tenant who held it when they happened", async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-1')
  const dpu = new SimulatedDpu(agent)
  const redis = new Redis(p.redisUrl)
  t.teardown(() => redis.disconnect())
  const heart = beating(redis, dpu)
  t.teardown(() => heart.stop())
  await heart.start()
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  const ready = await readyHost(p, 'host-1', 1)
  const lp = ready?.status.logicalPortReference?.logicalPort ?? ''
  t.equal(lp, 'hz/group-a/host-1')
  await startHealth(p)
  const tokens = {
    operator: [OPERATOR],
    tenants: {
      'tenant-a': ['tenant-a-token-0123456789'],
      'tenant-b': ['tenant-b-token-0123456789'],
    },
  }
  const app = createApp({ readiness: {}, v1: { client: p.client, tokens } })
  const eventsAs = async (token: string) => {
    const answer = await app.request('/v1/dpus/dpu-1/events', {
      headers: { authorization: `Bearer ${token}` },
    })
    return { status: answer.status, body: JSON.stringify(await answer.json()) }
  }

  // tenant-a's host leaves, but the DPU keeps its port bound (it ignores the isolate).
  dpu.sync()
  dpu.stubborn.add(lp)
  await p.client.deleteHost('host-1')
  await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => h === undefined,
  )
  // At once, before dpu.health's grace for a stray port: the DPU goes to tenant-b.
  const held = await p.client.getDpu('dpu-1')
  if (!held) throw new Error('dpu-1 is not in the inventory')
  t.equal(held.spec.tenantId, 'tenant-a')
  await p.client.applyDpu('dpu-1', { ...held.spec, tenantId: 'tenant-b' })
  const moved = Date.now()

  // After the move, dpu.health finds tenant-a's port still bound and isolates it: an
  // event naming tenant-a's group and host, recorded while tenant-b holds the DPU.
  const events = await until(
    () => p.client.events('dpu', 'dpu-1'),
    (list) =>
      list.some(
        (e) =>
          e.reason === 'StrayPortIsolated' && e.message.includes(lp) && Date.parse(e.at) >= moved,
      ),
    15_000,
  )
  t.ok(
    events.some((e) => e.reason === 'StrayPortIsolated' && e.message.includes(lp)),
    'the operator reads it',
  )
  const asB = await eventsAs('tenant-b-token-0123456789')
  t.equal(asB.status, 200, 'tenant-b reads its DPU')
  t.notMatch(asB.body, /group-a|host-1/, "none of tenant-a's groups or hosts in what it reads")
  t.equal((await eventsAs('tenant-a-token-0123456789')).status, 404, 'nor does tenant-a, now')
  t.notMatch(
    JSON.stringify(await p.client.events('dpu', 'dpu-1')),
    /"tenant"/,
    'whose an event is stays in the store',
  )
})

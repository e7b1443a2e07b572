/**
 * Faults during load: while hosts are attached and detached in bulk, a controller process
 * is SIGKILLed, Redis is SIGKILLed (the embedded one comes back) and a DPU agent
 * restarts. Afterwards every object converges to its spec, no address is held twice or
 * leaked, and NB holds exactly the ports of the hosts that exist.
 *
 * (A group's NB ovsdb-server killed under load is `test/lab/central-fault.test.ts`'s.)
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import {
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  startWorkerProcess,
  stopProcess,
  type TestAgent,
  until,
} from './fixtures.ts'

const GROUPS = ['chaos-a', 'chaos-b', 'chaos-c']
const DPUS = ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4']
const HOSTS = 90

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A request that may meet Redis while it restarts: tried again, as a client would. */
async function retried<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request()
    } catch (error) {
      // ioredis gives up on one command after 20 reconnect attempts (MaxRetriesPerRequestError).
      const transient =
        /ECONNREFUSED|ECONNRESET|Connection is closed|LOADING|EPIPE|max retries per request/i.test(
          String((error as Error)?.message),
        )
      if (!transient || attempt >= 40) throw error
      await sleep(250)
    }
  }
}

async function redisPid(p: Pipeline): Promise<number> {
  const redis = new Redis(p.redisUrl)
  try {
    return Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1])
  } finally {
    redis.disconnect()
  }
}

t.test(
  'attaches and detaches converge through a controller, Redis and agent crash',
  { timeout: 240_000 },
  async (t) => {
    const p = await startPipeline(t)
    const agents = new Map<string, TestAgent>()
    for (const dpu of DPUS) agents.set(dpu, await p.agent(dpu))
    for (const [i, group] of GROUPS.entries()) {
      await p.client.applyGroup(
        group,
        groupSpec('tenant-c', `10.${50 + i}.0.0/24`, `10.${50 + i}.0.1`),
      )
    }
    const extra = startWorkerProcess(p)
    t.teardown(() => stopProcess(extra.child))
    await extra.ready

    const names = Array.from({ length: HOSTS }, (_, i) => `chaos-host-${i}`)
    // Every third host, ten requests after its attach, is detached again.
    const deleted = new Set<string>()
    const groupOf = (i: number) => GROUPS[i % GROUPS.length] ?? 'chaos-a'
    const requests = (async () => {
      for (const [i, name] of names.entries()) {
        const dpu = DPUS[i % DPUS.length] ?? 'dpu-1'
        // Every host its own MAC and, per DPU, its own port.
        const spec = hostSpec(groupOf(i), dpu, 100 + i, { identifier: `pf${i}` })
        await retried(() => p.client.applyHost(name, spec))
        const doomed = names[i - 10]
        if (doomed && i % 3 === 0) {
          await retried(() => p.client.deleteHost(doomed))
          deleted.add(doomed)
        }
        await sleep(20)
      }
    })()
    // Awaited below, after the faults; a failure meanwhile is not an unhandled rejection.
    requests.catch(() => {})

    // The faults, in turn, while the requests and their jobs run.
    await sleep(800)
    stopProcess(extra.child)
    t.equal(await extra.exited, 'SIGKILL', 'a controller process was killed mid-burst')
    await sleep(500)
    process.kill(await redisPid(p), 'SIGKILL')
    await sleep(1500)
    await agents.get('dpu-2')?.close()
    await sleep(500)
    agents.set('dpu-2', await retried(() => p.agent('dpu-2')))
    await requests

    const live = names.filter((n) => !deleted.has(n))

    const converged = await until(
      () => retried(() => p.controller.store.listHosts()),
      (hosts) =>
        hosts.length === live.length &&
        hosts.every((h) => h.status.phase === 'Ready' && h.status.configsSynced),
      150_000,
    )
    t.same(converged.map((h) => h.name).sort(), [...live].sort(), 'exactly the live hosts remain')
    t.ok(
      converged.every((h) => h.status.phase === 'Ready'),
      'every live host is Ready with its configs synced',
    )

    for (const group of GROUPS) {
      const allocations = await p.controller.ipam.allocations(group)
      const ips = allocations.map((a) => a.ip)
      t.equal(new Set(ips).size, ips.length, `${group}: no address is held twice`)
      const members = converged.filter((h) => h.spec.resourceGroup === group).map((h) => h.name)
      t.same(
        allocations.map((a) => a.owner).sort(),
        [...members].sort(),
        `${group}: addresses are held by its live hosts only (none leaked)`,
      )
      const ports = (await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port'))
        .split('\n')
        .filter((l) => l.startsWith(topologyNames.hostPort(group, 'chaos-host-')))
        .sort()
      t.same(
        ports,
        members.map((h) => topologyNames.hostPort(group, h)).sort(),
        `${group}: NB has exactly its live hosts' ports`,
      )
    }
  },
)

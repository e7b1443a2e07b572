/**
 * Faults during load: while hosts are attached and detached in bulk (some with public
 * IPs), in turn a controller process is SIGKILLed, Redis is SIGKILLed (the embedded one
 * comes back), one group's NB ovsdb-server is SIGKILLed (its central restarts it), a DPU
 * agent restarts, and bgpd is SIGKILLed (restarted from its saved configuration).
 * Afterwards every object converges to its spec, no address or public IP is held twice or
 * leaked, every group's NB holds exactly the ports of its hosts that exist, and FRR
 * announces exactly the public IPs of the live hosts.
 *
 * (Pings across an NB kill are `test/lab/central-fault.test.ts`'s.)
 */
import { execFile } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import { tempDir } from '../helpers/stack.ts'
import {
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  type TestAgent,
  until,
} from './fixtures.ts'
import { startPipelineFrr, startWorkerProcess, stopProcess } from './scenarios.ts'

const GROUPS = ['chaos-a', 'chaos-b', 'chaos-c']
/** Two DPUs per group: with a central per group, a DPU follows one group's SB. */
const DPUS = ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4', 'dpu-5', 'dpu-6']
/** With every third host detached again: about 300 attaches and detaches. */
const HOSTS = 225
/**
 * Every ninth host asks for a public IP, each on a DPU of its own: a DPU's NAT IP maps to
 * one host.
 */
const isPublic = (i: number) => i % 9 === 4
const PUBLIC_DPUS = Array.from({ length: Math.ceil(HOSTS / 9) }, (_, k) => `dpu-${20 + k}`)
const PUBLIC_IPS = Array.from({ length: 30 }, (_, i) => `203.0.113.${40 + i}`)
const run = promisify(execFile)

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
  '~300 attaches and detaches converge through a controller, Redis, NB, agent and bgpd crash',
  { timeout: 240_000 },
  async (t) => {
    const p = await startPipeline(t, { perGroup: true, frr: true })
    const frr = await startPipelineFrr(t, p)
    for (const ip of PUBLIC_IPS) await p.client.registerPublicIp(ip)
    const agents = new Map<string, TestAgent>()
    for (const dpu of [...DPUS, ...PUBLIC_DPUS]) agents.set(dpu, await p.agent(dpu))
    for (const [i, group] of GROUPS.entries()) {
      await p.client.applyGroup(
        group,
        groupSpec('tenant-c', `10.${50 + i}.0.0/24`, `10.${50 + i}.0.1`),
      )
    }
    // A second controller process works on the same groups' centrals, which this process
    // runs (and restarts): it is given them as centrals the operator runs.
    const centrals = Object.fromEntries(
      await Promise.all(
        GROUPS.map(async (g) => {
          const { nb, sb, sbController } = await centralOf(p, g)
          return [g, { nb, sb, sbController }] as const
        }),
      ),
    )
    // Centrals run on demand here, as `npm start` runs them: a group's attach takes its slot
    // before it starts the central. The second process, given them as the operator's, can
    // neither start nor stop them and takes no slot; a replica running them on demand would
    // have. The slots are taken here for it: else an apply in this process (a public IP's)
    // finds a group it attached hosts to holding none, and applies nothing.
    for (const g of GROUPS) await p.controller.store.centrals.hold(g)
    const centralsFile = join(await tempDir(t), 'centrals.json')
    await writeFile(centralsFile, JSON.stringify(centrals))
    const extra = startWorkerProcess(p, { OVN_CENTRALS_FILE: centralsFile })
    t.teardown(() => stopProcess(extra.child))
    await extra.ready

    const names = Array.from({ length: HOSTS }, (_, i) => `chaos-host-${i}`)
    // Every third host, ten requests after its attach, is detached again.
    const deleted = new Set<string>()
    let sent = false
    const groupOf = (i: number) => GROUPS[i % GROUPS.length] ?? 'chaos-a'
    const requests = (async () => {
      for (const [i, name] of names.entries()) {
        const dpu = isPublic(i)
          ? (PUBLIC_DPUS[Math.floor(i / 9)] ?? 'dpu-20')
          : (DPUS[(i % GROUPS.length) * 2 + (Math.floor(i / GROUPS.length) % 2)] ?? 'dpu-1')
        // Every host its own MAC and, per DPU, its own port.
        const spec = hostSpec(groupOf(i), dpu, 100 + i, {
          identifier: `pf${i}`,
          hostMAC: `52:54:00:03:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`,
          ...(isPublic(i) ? { hostAccess: 'PublicAccess' } : {}),
        })
        await retried(() => p.client.applyHost(name, spec))
        const doomed = names[i - 10]
        if (doomed && i % 3 === 0) {
          await retried(() => p.client.deleteHost(doomed))
          deleted.add(doomed)
        }
        await sleep(60)
      }
      sent = true
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
    const nb = (await retried(() => centralOf(p, 'chaos-b'))).nb
    process.kill(await pidIn(dirname(nb.replace(/^unix:/, '')), 'nb.pid'), 'SIGKILL')
    t.pass("chaos-b's NB ovsdb-server was killed mid-burst")
    await sleep(500)
    await agents.get('dpu-2')?.close()
    await sleep(500)
    agents.set('dpu-2', await retried(() => p.agent('dpu-2')))
    await sleep(500)
    process.kill(await pidIn(p.frrVtyDir ?? '', 'bgpd.pid'), 'SIGKILL')
    t.notOk(sent, 'bgpd was killed mid-burst, the last fault, with requests still coming')
    await requests

    const live = names.filter((n) => !deleted.has(n))

    const converged = await until(
      () => retried(() => p.controller.store.hosts.list()),
      (hosts) =>
        hosts.length === live.length &&
        hosts.every((h) => h.status.phase === 'Ready' && h.status.configsSynced),
      150_000,
    )
    t.same(converged.map((h) => h.name).sort(), [...live].sort(), 'exactly the live hosts remain')
    const stuck = converged.filter((h) => h.status.phase !== 'Ready' || !h.status.configsSynced)
    t.same(
      stuck.map((h) => ({ name: h.name, status: h.status, specVersion: h.specVersion })),
      [],
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
      const { nb } = await centralOf(p, group)
      const ports = (
        await run('ovn-nbctl', [
          `--db=${nb}`,
          '--bare',
          '--columns=name',
          'list',
          'Logical_Switch_Port',
        ])
      ).stdout
        .split('\n')
        .filter((l) => l.startsWith(topologyNames.hostPort(group, 'chaos-host-')))
        .sort()
      t.same(
        ports,
        members.map((h) => topologyNames.hostPort(group, h)).sort(),
        `${group}: NB has exactly its live hosts' ports`,
      )
    }

    // Public IPs: each held by one live host that asked for one, none leaked, and FRR
    // announces exactly those, via each host's DPU NAT IP.
    const held = converged.flatMap((h) => {
      const ip = h.status.hostAccessIPs?.publicIP
      return ip ? [{ host: h, ip }] : []
    })
    const wanting = converged.filter((h) => h.spec.hostAccess === 'PublicAccess')
    t.equal(held.length, wanting.length, 'every live PublicAccess host holds a public IP')
    t.equal(new Set(held.map((h) => h.ip)).size, held.length, 'no public IP is held twice')
    const pool = await Promise.all(PUBLIC_IPS.map((ip) => p.client.publicIp(ip)))
    t.same(
      pool
        .filter((ip) => ip.allocated)
        .map((ip) => ip.ip)
        .sort(),
      held.map((h) => h.ip).sort(),
      'the pool lends only to live hosts (none leaked)',
    )
    const wanted = new Map(
      held.map(({ host, ip }) => [`${ip}/32`, host.status.hostAccessIPs?.fabricIP]),
    )
    const announced = await until(
      // bgpd may still be coming back.
      () => frr.table().catch(() => new Map<string, string>()),
      (table) =>
        table.size === wanted.size && [...wanted].every(([p, hop]) => table.get(p) === hop),
      30_000,
    )
    t.same(
      Object.fromEntries([...announced].sort()),
      Object.fromEntries([...wanted].sort()),
      'FRR announces exactly the live public IPs, each via its DPU NAT IP',
    )
  },
)

/** A group's central (started if it is not running). */
function centralOf(p: Pipeline, group: string) {
  if (!p.centrals) throw new Error('the pipeline runs no central per group')
  return p.centrals.ensure(group)
}

/** The pid a daemon wrote to `<dir>/<file>`. */
async function pidIn(dir: string, file: string): Promise<number> {
  return Number((await readFile(join(dir, file), 'utf8')).trim())
}

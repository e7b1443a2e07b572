/**
 * Power cuts: `npm start`'s whole stack (the controller and every daemon it runs: Redis,
 * FRR, a central per group) SIGKILLed at once, ten times in a row, while groups are
 * created, hosts attached and both deleted; each time started again on the same data dir.
 *
 * Two of the cuts fall inside the making of a central, forced: an `ovsdb-tool` first on
 * PATH stops at its `create` (leaving an empty file, as a cut between creating the file
 * and writing it does; or the whole database, before Hydrazine renamed it) and tells the
 * test, which cuts. The others fall right after the requests were answered, or a little
 * later, while their jobs run.
 *
 * After every start: each request answered 2xx is kept and converges (groups and hosts
 * Ready, deleted ones gone). At the end: each group's NB holds its own rows and exactly
 * its hosts' ports, each address is held once and none is lost, no central of a deleted
 * group and no temporary file is left.
 */
import { execFile, spawn } from 'node:child_process'
import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Job, Worker } from 'bullmq'
import t, { type Test } from 'tap'
import { centralDirName, centralsRoot } from '../../infra/centrals/local.ts'
import { agentQueueName } from '../../lib/agent-protocol/index.ts'
import {
  HOST_KEY,
  OWNER_KEY,
  ownerOf,
  TOPOLOGY_TABLES,
  topologyNames,
} from '../../lib/ovn/index.ts'
import { requireBinary } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { createRedis, type RedisClient } from '../../lib/redis/connection.ts'
import { FakeChassis } from '../helpers/fake-chassis.ts'
import type { JsonAnswer } from '../helpers/http.ts'
import { processesMentioning } from '../helpers/processes.ts'
import { tempDir } from '../helpers/stack.ts'
import { OPERATOR, TEST_TOKENS } from '../helpers/tokens.ts'
import { answer } from '../pipeline/stand-in-agent.ts'

const run = promisify(execFile)
const main = new URL('../../infra/main.ts', import.meta.url).pathname
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** How long everything answered may take to converge after a start. */
const CONVERGE_MS = 45_000
/** After this long converging, what is still pending is printed. */
const SLOW_CONVERGE_MS = 8_000

/**
 * Where each cut falls: inside a central's making (`empty`: its database file created and
 * not written; `whole`: written under the name Hydrazine gave it, not renamed yet), right
 * after the last answer, or that many ms later.
 */
type CutAt = 'empty' | 'whole' | 'answered' | number
const CUTS: readonly CutAt[] = [
  'empty',
  'answered',
  300,
  'whole',
  150,
  'answered',
  'empty',
  600,
  50,
  'answered',
]

/** What the API accepted (answered 2xx), as a user expects to find it. */
interface Ledger {
  readonly groups: Map<string, { readonly deleted: boolean }>
  readonly hosts: Map<
    string,
    { readonly group: string; readonly dpu: string; readonly deleted: boolean }
  >
}

/**
 * `ovsdb-tool` as the test sees it: the real one, except for the first `create` after
 * the test armed it (`<cutDir>/arm` holds the mode), which leaves the file as a cut would,
 * says so (`<cutDir>/cut-now`) and waits for the cut.
 */
function ovsdbToolShim(realTool: string): string {
  return `#!/bin/sh
if [ "$1" = create ] && [ -n "$HZ_TEST_CUT_DIR" ] && mv "$HZ_TEST_CUT_DIR/arm" "$HZ_TEST_CUT_DIR/armed" 2>/dev/null; then
  if [ "$(cat "$HZ_TEST_CUT_DIR/armed")" = empty ]; then : > "$2"; else "${realTool}" "$@"; fi
  : > "$HZ_TEST_CUT_DIR/cut-now"
  exec sleep 600
fi
exec "${realTool}" "$@"
`
}

t.test(
  'ten power cuts during creates, attaches and deletes: nothing accepted is lost',
  async (t) => {
    const began = performance.now()
    const dataDir = await tempDir(t, 'hz-cut-')
    const cutDir = join(dataDir, 'cut')
    const shimDir = join(dataDir, 'bin')
    await mkdir(cutDir)
    await mkdir(shimDir)
    await writeFile(join(shimDir, 'ovsdb-tool'), ovsdbToolShim(requireBinary('ovsdb-tool')))
    await chmod(join(shimDir, 'ovsdb-tool'), 0o755)
    const tokensFile = join(dataDir, 'tokens.json')
    await writeFile(tokensFile, JSON.stringify(TEST_TOKENS))
    const port = await freePort()
    const api = `http://127.0.0.1:${port}/v1`
    const env = {
      ...process.env,
      PATH: `${shimDir}:${process.env.PATH ?? ''}`,
      HZ_TEST_CUT_DIR: cutDir,
      HYDRAZINE_DATA_DIR: dataDir,
      HYDRAZINE_HTTP_PORT: String(port),
      HYDRAZINE_GRPC_PORT: '0',
      HYDRAZINE_METRICS_LISTEN: 'off',
      HYDRAZINE_TOKENS_FILE: tokensFile,
      HYDRAZINE_DPU_HEALTH_MS: '0',
      // A job the cut left locked is taken over 2 s after the start, not 30 s.
      HYDRAZINE_JOB_LOCK_MS: '2000',
      LOG_LEVEL: 'warn',
    }

    const call: Call = async (method, path, body) => {
      const res = await fetch(`${api}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${OPERATOR}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      return { status: res.status, json: text ? JSON.parse(text) : undefined }
    }

    const ledger: Ledger = { groups: new Map(), hosts: new Map() }
    const accept = async (what: string, answer: Promise<JsonAnswer>) => {
      const { status, json } = await answer
      if (status < 200 || status > 299) t.fail(`${what}: ${status} ${JSON.stringify(json)}`)
      return status >= 200 && status <= 299
    }
    const putGroup = async (i: number) => {
      const name = `g${i}`
      const spec = {
        tenantId: 'tenant-a',
        network: { cidr: `10.44.${i}.0/24`, gateway: `10.44.${i}.1` },
      }
      if (await accept(`PUT ${name}`, call('PUT', `/resource-groups/${name}`, spec)))
        ledger.groups.set(name, { deleted: false })
    }
    const putHost = async (name: string, group: string, i: number, n: number) => {
      const dpu = `dpu-${i}`
      const spec = {
        resourceGroup: group,
        hostMAC: `52:54:00:44:${i.toString(16).padStart(2, '0')}:${n.toString(16).padStart(2, '0')}`,
        dpu: { id: dpu, ips: [`172.18.44.${i}`] },
      }
      if (await accept(`PUT ${name}`, call('PUT', `/managed-resources/${name}`, spec)))
        ledger.hosts.set(name, { group, dpu, deleted: false })
    }
    const deleteHost = async (name: string) => {
      const host = ledger.hosts.get(name)
      if (host && (await accept(`DELETE ${name}`, call('DELETE', `/managed-resources/${name}`))))
        ledger.hosts.set(name, { ...host, deleted: true })
    }
    const deleteGroup = async (name: string) => {
      for (const [host, h] of ledger.hosts)
        if (h.group === name && !h.deleted) await deleteHost(host)
      if (await accept(`DELETE ${name}`, call('DELETE', `/resource-groups/${name}`)))
        ledger.groups.set(name, { deleted: true })
    }

    /** This cycle's requests: few per cut; every kind of work over the ten. */
    const requests = async (i: number) => {
      // The host right behind its group: its attach waits while the group is provisioning.
      await putGroup(i)
      await putHost(`g${i}-a`, `g${i}`, i, 1)
      if (i % 2 === 0 && ledger.groups.get(`g${i - 1}`)?.deleted === false)
        await putHost(`g${i - 1}-b`, `g${i - 1}`, i - 1, 2)
      if (i % 3 === 0) await deleteHost(`g${i - 2}-a`)
      if (i % 4 === 0) await deleteGroup(`g${i - 3}`)
    }

    let stack: Stack | undefined
    t.teardown(async () => {
      if (stack) await cut(stack, dataDir)
    })
    const times: string[] = []
    for (const [index, at] of CUTS.entries()) {
      const i = index + 1
      const startedAt = performance.now()
      stack = await startStack(env, dataDir)
      const up = performance.now()
      const converged = await convergence(call, ledger, (left) =>
        t.comment(`start ${i}: still converging after ${SLOW_CONVERGE_MS} ms: ${left.join('; ')}`),
      )
      t.same(converged, [], `start ${i}: everything answered before the cut converged`)
      // The stack is cut by the teardown.
      if (converged.length > 0) return
      const settled = performance.now()
      await rm(join(cutDir, 'cut-now'), { force: true })
      if (typeof at === 'string' && at !== 'answered') await writeFile(join(cutDir, 'arm'), at)
      await requests(i)
      if (at === 'empty' || at === 'whole') {
        const hit = await waitFor(() => exists(join(cutDir, 'cut-now')), 20_000)
        t.ok(hit, `cut ${i} falls inside the making of g${i}'s central (${at})`)
      } else if (typeof at === 'number') await sleep(at)
      await cut(stack, dataDir)
      stack = undefined
      times.push(
        `cut ${i} (${at}): up ${ms(up - startedAt)}, converged ${ms(settled - up)}, ` +
          `requests ${ms(performance.now() - settled)}`,
      )
    }
    await rm(join(cutDir, 'arm'), { force: true })

    stack = await startStack(env, dataDir)
    t.same(await convergence(call, ledger), [], 'after the last cut everything answered converged')
    await checkNorthbounds(t, dataDir, ledger)
    await checkAddresses(t, call, ledger)
    const live = [...ledger.groups].filter(([, g]) => !g.deleted).map(([name]) => name)
    t.same(
      (await readdir(centralsRoot(dataDir))).sort(),
      live.map(centralDirName).sort(),
      "a central for each group, none for a deleted group's",
    )
    const leftovers = (await run('find', [dataDir, '-name', '*.tmp*'])).stdout.trim()
    t.equal(leftovers, '', 'no temporary file is left')

    stack.child.kill('SIGINT')
    t.equal(await stack.exited, 0, 'and it stops cleanly')
    stack.agents.close()
    stack = undefined
    for (const line of times) t.comment(line)
    t.comment(`ten cuts in ${ms(performance.now() - began)}`)
  },
)

/** A request to the API with the operator token. */
type Call = (method: string, path: string, body?: unknown) => Promise<JsonAnswer>

interface Stack {
  readonly child: ReturnType<typeof spawn>
  readonly exited: Promise<number | null>
  readonly agents: { close(): void }
}

/** `npm start`'s process on `dataDir`, up; then stand-in agents for every DPU on its agents' Redis. */
async function startStack(env: NodeJS.ProcessEnv, dataDir: string): Promise<Stack> {
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let output = ''
  for (const stream of [child.stdout, child.stderr])
    stream?.on('data', (c: Buffer) => (output += c))
  let running = true
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      running = false
      r(code)
    }),
  )
  const up = await waitFor(async () => output.includes('Hydrazine is up') || !running, 60_000)
  if (!up || !output.includes('Hydrazine is up')) {
    child.kill('SIGKILL')
    throw new Error(`it did not start:\n${output}`)
  }
  // The agents' queues are on the agents' Redis, the stack's second one.
  const redisPort = /agents' Redis:\s+redis:\/\/default:\*\*\*@127\.0\.0\.1:(\d+)/.exec(output)?.[1]
  const password = (await readFile(join(dataDir, 'agents-redis', 'password'), 'utf8')).trim()
  const agents = startAgents(`redis://default:${password}@127.0.0.1:${redisPort}`)
  return { child, exited, agents }
}

/**
 * DPU agents that answer like the real one, each on its own queue; gone with the cut
 * (connections dropped, not closed: the Redis they talk to is dead).
 */
function startAgents(redisUrl: string): { close(): void } {
  const chassis = new FakeChassis()
  const connections: RedisClient[] = []
  const workers: Worker[] = []
  for (let i = 1; i <= 10; i++) {
    const dpuId = `dpu-${i}`
    const connection = createRedis({ url: redisUrl }, { maxRetriesPerRequest: null })
    connection.on('error', () => {})
    connections.push(connection)
    const worker = new Worker(agentQueueName(dpuId), (job: Job) => answer(dpuId, job, chassis), {
      connection,
      concurrency: 4,
      // A job a cut left with a dead agent is taken over soon after the start.
      lockDuration: 2000,
      stalledInterval: 2000,
    })
    worker.on('error', () => {})
    workers.push(worker)
  }
  return {
    close() {
      for (const c of connections) c.disconnect()
      for (const w of workers) void w.close(true).catch(() => {})
      void chassis.close().catch(() => {})
    },
  }
}

/**
 * The power cut: every process of the stack stopped, then killed, at once — the
 * controller (its process group, `ovsdb-tool` included) and every daemon (each in its own
 * group, with its reaper, which must not get to stop it gracefully).
 */
async function cut(stack: Stack, dataDir: string): Promise<void> {
  const pids = (await processesMentioning(dataDir))
    .map((line) => Number(line.split(/\s+/)[0]))
    .filter((pid) => pid !== process.pid)
  const main = stack.child.pid ?? 0
  for (const signal of ['SIGSTOP', 'SIGKILL'] as const) {
    for (const pid of [-main, ...pids.map((p) => -p), ...pids]) {
      try {
        process.kill(pid, signal)
      } catch {}
    }
  }
  stack.agents.close()
  await stack.exited
  await waitFor(async () => (await processesMentioning(dataDir)).length === 0, 10_000)
}

/**
 * What has not converged after `CONVERGE_MS` (empty when everything has): each group and
 * host accepted is Ready at its spec version, each deleted one is gone.
 */
async function convergence(
  call: Call,
  ledger: Ledger,
  slow: (left: string[]) => void = () => {},
): Promise<string[]> {
  const pending = async () => {
    const left: string[] = []
    const objects = [
      ...[...ledger.groups].map(([name, g]) => ({ path: `/resource-groups/${name}`, ...g })),
      ...[...ledger.hosts].map(([name, h]) => ({ path: `/managed-resources/${name}`, ...h })),
    ]
    for (const o of objects) {
      const { status, json } = await call('GET', o.path)
      if (o.deleted ? status !== 404 : !isReady(status, json))
        left.push(`${o.path}: ${status} ${json?.status?.phase ?? ''} ${lastCondition(json)}`)
    }
    return left
  }
  let left = await pending()
  const began = Date.now()
  let told = false
  while (left.length > 0 && Date.now() < began + CONVERGE_MS) {
    await sleep(100)
    left = await pending()
    // What is still converging after SLOW_CONVERGE_MS, for the run's comments: a slow
    // start says what it waited on.
    if (!told && left.length > 0 && Date.now() > began + SLOW_CONVERGE_MS) slow(left)
    told ||= Date.now() > began + SLOW_CONVERGE_MS
  }
  return left
}

// biome-ignore lint/suspicious/noExplicitAny: API answers are read loosely here
function isReady(status: number, json: any): boolean {
  const s = json?.status
  return status === 200 && s?.phase === 'Ready' && s.observedVersion === json.specVersion
}

// biome-ignore lint/suspicious/noExplicitAny: API answers are read loosely here
function lastCondition(json: any): string {
  const false_ = (json?.status?.conditions ?? []).filter(
    (c: { status: string }) => c.status !== 'True',
  )
  const c = false_.at(-1)
  return c ? `${c.type}=${c.status} ${c.reason}: ${c.message}` : ''
}

/**
 * Each group's NB holds only rows it owns, and a port for exactly its hosts. Read from
 * the database file (`ovsdb-tool query` changes nothing): a central starts only when its
 * group's next job needs it.
 */
async function checkNorthbounds(t: Test, dataDir: string, ledger: Ledger): Promise<void> {
  for (const [group, g] of ledger.groups) {
    if (g.deleted) continue
    const file = join(centralsRoot(dataDir), centralDirName(group), 'nb.db')
    const select = (table: string) => ({
      op: 'select',
      table,
      where: [],
      columns: table === 'Logical_Switch_Port' ? ['name', 'external_ids'] : ['external_ids'],
    })
    const { stdout } = await run('ovsdb-tool', [
      'query',
      file,
      JSON.stringify(['OVN_Northbound', ...TOPOLOGY_TABLES.map(select)]),
    ])
    const results = JSON.parse(stdout) as {
      rows?: { name?: unknown; external_ids: unknown }[]
      error?: string
    }[]
    t.same(
      results.filter((r) => r.error !== undefined),
      [],
      `${group}'s NB can be read`,
    )
    const owners = new Set<string>()
    for (const { rows = [] } of results)
      for (const row of rows) owners.add(mapOf(row.external_ids)[OWNER_KEY] ?? '(none)')
    t.same([...owners], [ownerOf(group)], `${group}'s NB holds only ${group}'s rows`)
    const ports = results[TOPOLOGY_TABLES.indexOf('Logical_Switch_Port')]?.rows ?? []
    const hostPorts = ports
      .filter((row) => mapOf(row.external_ids)[HOST_KEY] !== undefined)
      .map((row) => String(row.name))
      .sort()
    const hosts = [...ledger.hosts]
      .filter(([, h]) => h.group === group && !h.deleted)
      .map(([name]) => topologyNames.hostPort(group, name))
      .sort()
    t.same(hostPorts, hosts, `${group}'s NB has a port for each of its hosts, and no other`)
  }
}

/** An OVSDB map as JSON (`["map", [[k, v], …]]`) as an object. */
function mapOf(value: unknown): Record<string, string> {
  const pairs = Array.isArray(value) && value[0] === 'map' ? (value[1] as [string, string][]) : []
  return Object.fromEntries(pairs)
}

/** Each host holds one address of its group, no two the same; none is held by a host gone. */
async function checkAddresses(t: Test, call: Call, ledger: Ledger): Promise<void> {
  for (const [group, g] of ledger.groups) {
    if (g.deleted) continue
    const { json } = await call('GET', `/resource-groups/${group}/ipam`)
    const allocations: { owner: string; ip: string }[] = json.allocations ?? []
    const hosts = [...ledger.hosts].filter(([, h]) => h.group === group && !h.deleted)
    const ips: string[] = []
    for (const [name] of hosts) {
      const { json: host } = await call('GET', `/managed-resources/${name}`)
      ips.push(host.status.hostAccessIPs?.hostIP)
    }
    t.equal(new Set(ips).size, hosts.length, `${group}: its hosts have distinct addresses`)
    t.same(
      allocations.map((a) => a.ip).sort(),
      [...ips].sort(),
      `${group}: IPAM holds exactly its hosts' addresses`,
    )
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await sleep(25)
  }
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  )

const ms = (n: number) => `${Math.round(n)} ms`

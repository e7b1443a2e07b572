/**
 * Two controller replicas (`npm start` twice) on one Redis and one OVN central, each with
 * its own embedded BGP speaker: only the FRR consumer's announces. 300 attaches through
 * both APIs (HTTP to one, gRPC to the other), the replica running the FRR consumer
 * SIGKILLed mid-burst. Every host turns Ready, with no duplicate NB row, address or public
 * IP, and the survivor takes the FRR consumer over and announces every public IP.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Metadata } from '@grpc/grpc-js'
import { Redis } from 'ioredis'
import t from 'tap'
import { createHydrazineClient } from '../../api/grpc/protocol.ts'
import { embeddedFrrDir } from '../../infra/local/stack.ts'
import { createFrrController, createVty } from '../../lib/frr/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { freePort } from '../../lib/process/ports.ts'
import { StateStore } from '../../lib/state/store.ts'
import { hostMessage } from '../api/grpc-fixture.ts'
import { FakeChassis } from '../helpers/fake-chassis.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { tempDir, withStack } from '../helpers/stack.ts'
import { groupSpec, hostSpec, startStandInAgent, until } from '../pipeline/fixtures.ts'

const main = fileURLToPath(new URL('../../infra/main.ts', import.meta.url))
const OPERATOR = 'operator-token-replicas-0123456789'
const HOSTS = 300
const GROUPS = 3
/** A DPU serves one group at a time: group g has DPUs g, g + GROUPS, g + 2 × GROUPS, … */
const DPUS = 12
const PUBLIC = 10

interface Replica {
  readonly name: string
  readonly child: ChildProcess
  readonly http: string
  readonly grpc: string
  readonly exited: Promise<unknown>
  output(): string
}

async function startReplica(name: string, env: Record<string, string>): Promise<Replica> {
  const http = await freePort()
  const grpc = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    env: {
      ...process.env,
      LOG_LEVEL: 'info',
      HYDRAZINE_METRICS_LISTEN: 'off',
      HYDRAZINE_HTTP_PORT: String(http),
      HYDRAZINE_GRPC_PORT: String(grpc),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString()
  })
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise((r) => child.once('exit', r))
  return {
    name,
    child,
    http: `http://127.0.0.1:${http}`,
    grpc: `127.0.0.1:${grpc}`,
    exited,
    output: () => output,
  }
}

/** The host request for host `i`: its group, DPU, and (the first few) a public IP. */
function hostRequest(i: number) {
  const group = `group-${i % GROUPS}`
  const dpu = `dpu-${(i % GROUPS) + GROUPS * (Math.floor(i / GROUPS) % (DPUS / GROUPS))}`
  const mac = `52:54:00:02:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`
  return {
    http: {
      ...hostSpec(group, dpu, i),
      hostMAC: mac,
      ...(i < PUBLIC ? { hostAccess: 'PublicAccess' } : {}),
    },
    grpc: {
      ...hostMessage(group, dpu, i),
      hostMac: mac,
      ...(i < PUBLIC ? { hostAccess: 'HOST_ACCESS_PUBLIC_ACCESS' } : {}),
    },
  }
}

t.test('two replicas, 300 attaches through both APIs, one SIGKILLed mid-burst', async (t) => {
  const stack = await withStack(t, { redis: true, ovn: true })
  if (!stack.redis || !stack.ovn) throw new Error('stack incomplete')
  const dir = await tempDir(t)
  const tokensFile = join(dir, 'tokens.json')
  await writeFile(tokensFile, JSON.stringify({ operator: [OPERATOR] }), { mode: 0o600 })
  const env = (name: string) => ({
    REDIS_URL: stack.redis?.url ?? '',
    OVN_NB_DB: stack.ovn?.nb.unix ?? '',
    OVN_SB_DB: stack.ovn?.sb.remote ?? '',
    // No HYDRAZINE_FRR_VTY_DIR: each runs its own (embedded) BGP speaker.
    HYDRAZINE_TOKENS_FILE: tokensFile,
    HYDRAZINE_DATA_DIR: join(dir, name),
    // The jobs the SIGKILLed replica held are taken over 5 s after, not 30 s (+ 30 s for
    // the survivor's next check for stalled jobs).
    HYDRAZINE_JOB_LOCK_MS: '5000',
  })
  const replicas = await Promise.all(['a', 'b'].map((n) => startReplica(n, env(n))))
  t.teardown(async () => {
    for (const r of replicas) r.child.kill('SIGKILL')
    // A SIGKILLed `npm start` leaves its embedded daemons behind.
    for (const line of await processesMentioning(dir)) {
      const pid = Number(line.trim().split(/\s+/)[0])
      try {
        if (pid > 0) process.kill(pid, 'SIGKILL')
      } catch {
        // Gone meanwhile (the replicas' own daemons stop with them).
      }
    }
  })
  for (const r of replicas) {
    t.ok(
      await eventually(async () => r.output().includes('Hydrazine is up'), 60_000),
      `replica ${r.name} is up`,
    )
  }
  const [a, b] = replicas as [Replica, Replica]

  const chassis = new FakeChassis()
  t.teardown(() => chassis.close())
  for (let d = 0; d < DPUS; d++) {
    await startStandInAgent(t, { redisUrl: stack.redis.url, dpuId: `dpu-${d}`, chassis })
  }
  const redis = new Redis(stack.redis.url)
  t.teardown(() => redis.disconnect())
  const store = new StateStore(redis)
  /** The replica running the FRR consumer (the lease's holder names its data dir). */
  const frrLeader = async () => {
    const holder = (await store.leases.holder('frr-consumer')) ?? ''
    return replicas.find((r) => holder.endsWith(`:${join(dir, r.name)}`))
  }
  t.ok(await eventually(async () => (await frrLeader()) !== undefined, 15_000), 'one runs FRR')
  /** What a replica's own BGP speaker announces: prefix → next hop. */
  const announced = async (r: Replica) => {
    const vty = createVty({ vtyDir: embeddedFrrDir(join(dir, r.name)) })
    try {
      return await createFrrController({ vty }).table()
    } finally {
      vty.close()
    }
  }

  const headers = { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' }
  const httpPut = async (base: string, path: string, body: unknown) => {
    const res = await fetch(`${base}/v1/${path}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify(body),
    })
    if (res.status >= 300) throw new Error(`PUT ${path}: ${res.status} ${await res.text()}`)
  }
  for (let p = 0; p < PUBLIC; p++) await httpPut(a.http, `public-ips/203.0.113.${10 + p}`, {})
  for (let g = 0; g < GROUPS; g++) {
    await httpPut(
      a.http,
      `resource-groups/group-${g}`,
      groupSpec('tenant-a', `10.40.${g}.0/24`, `10.40.${g}.1`),
    )
  }
  await until(
    () => store.groups.list(),
    (gs) => gs.length === GROUPS && gs.every((g) => g.status.phase === 'Ready'),
    30_000,
  )

  // The public hosts first: only the FRR consumer's speaker announces their /32s.
  for (let i = 0; i < PUBLIC; i++) {
    await httpPut(a.http, `managed-resources/host-${i}`, hostRequest(i).http)
  }
  await until(
    () => store.hosts.list(),
    (hs) => hs.length === PUBLIC && hs.every((h) => h.status.phase === 'Ready'),
    60_000,
  )
  const leader = (await frrLeader()) ?? a
  const follower = leader === a ? b : a
  t.equal((await announced(leader)).size, PUBLIC, `${leader.name} (FRR consumer) announces them`)
  t.equal((await announced(follower)).size, 0, `${follower.name} stays silent`)

  const metadata = new Metadata()
  metadata.set('authorization', `Bearer ${OPERATOR}`)
  const grpcClients = new Map(replicas.map((r) => [r.name, createHydrazineClient(r.grpc)]))
  t.teardown(() => {
    for (const c of grpcClients.values()) c.close()
  })
  const grpcApply = (replica: Replica, name: string, spec: unknown) =>
    new Promise<void>((resolve, reject) => {
      grpcClients
        .get(replica.name)
        ?.applyManagedResource(
          { name, spec } as never,
          metadata,
          { deadline: Date.now() + 10_000 },
          (error) => (error ? reject(error) : resolve()),
        )
    })

  // Even hosts over HTTP to a, odd over gRPC to b; a request to a replica that died is
  // sent to the other, as a load balancer in front of them would.
  const killed = new Set<string>()
  const victim = leader
  const survivor = follower
  const apply = async (i: number) => {
    const request = hostRequest(i)
    const preferred = i % 2 === 0 ? a : b
    const order = killed.has(preferred.name) ? [survivor] : [preferred, survivor]
    let last: unknown
    for (const replica of order) {
      try {
        if (i % 2 === 0) await httpPut(replica.http, `managed-resources/host-${i}`, request.http)
        else await grpcApply(replica, `host-${i}`, request.grpc)
        return
      } catch (error) {
        last = error
      }
    }
    throw last
  }
  let next = PUBLIC
  const worker = async () => {
    while (next < HOSTS) {
      const i = next++
      if (i === HOSTS / 2 && !killed.has(victim.name)) {
        killed.add(victim.name)
        victim.child.kill('SIGKILL')
      }
      await apply(i)
    }
  }
  await Promise.all(Array.from({ length: 16 }, worker))
  await victim.exited
  t.pass(`replica ${victim.name} (the FRR consumer's) was SIGKILLed after ${HOSTS / 2} requests`)

  const hosts = await until(
    () => store.hosts.list(),
    (hs) => hs.length === HOSTS && hs.every((h) => h.status.phase === 'Ready'),
    180_000,
  )
  const ready = hosts.filter((h) => h.status.phase === 'Ready' && h.status.configsSynced)
  t.equal(ready.length, HOSTS, `all ${HOSTS} hosts are Ready with their configs synced`)
  for (const h of hosts.filter((h) => h.status.phase !== 'Ready').slice(0, 5)) {
    t.comment(`${h.name}: ${JSON.stringify(h.status)}`)
  }

  // No duplicate rows nor addresses.
  const nbctl = (...args: string[]) =>
    execFileSync('ovn-nbctl', [`--db=${stack.ovn?.nb.unix}`, ...args], { encoding: 'utf8' })
  for (let g = 0; g < GROUPS; g++) {
    const group = `group-${g}`
    const ports = nbctl('lsp-list', topologyNames.switch(group))
      .split('\n')
      .filter((l) => /host-/.test(l))
    t.equal(ports.length, HOSTS / GROUPS, `${group}: one switch port per host, none twice`)
    const ips = new Set(
      hosts
        .filter((h) => h.spec.resourceGroup === group)
        .map((h) => h.status.hostAccessIPs?.hostIP),
    )
    t.equal(ips.size, HOSTS / GROUPS, `${group}: ${HOSTS / GROUPS} distinct addresses`)
  }
  const publicIps = hosts.map((h) => h.status.hostAccessIPs?.publicIP).filter(Boolean)
  t.equal(new Set(publicIps).size, PUBLIC, `${PUBLIC} distinct public IPs`)
  t.equal(publicIps.length, PUBLIC, 'each held by one host')

  // The survivor runs the FRR consumer once the killed one's lease ran out (10 s; the
  // attaches may all be done sooner), and its speaker announces every public IP.
  t.ok(
    await eventually(async () => (await frrLeader())?.name === survivor.name, 20_000),
    `${survivor.name} took the FRR consumer over`,
  )
  t.ok(
    await eventually(async () => {
      const table = await announced(survivor)
      return table.size === PUBLIC && publicIps.every((ip) => table.has(`${ip}/32`))
    }, 30_000),
    `${survivor.name}'s speaker announces every public IP`,
  )
})

t.test('a second controller embedding its own OVN central on the same Redis refuses', async (t) => {
  const stack = await withStack(t, { redis: true, frr: true })
  const dir = await tempDir(t)
  // No OVN_NB_DB: each would run the groups' centrals itself (per-group, embedded).
  const env = (name: string) => ({
    REDIS_URL: stack.redis?.url ?? '',
    HYDRAZINE_FRR_VTY_DIR: stack.frr?.vtyDir ?? '',
    HYDRAZINE_DATA_DIR: join(dir, name),
  })
  const first = await startReplica('a', env('a'))
  t.teardown(() => first.child.kill('SIGKILL'))
  t.ok(
    await eventually(async () => first.output().includes('Hydrazine is up'), 60_000),
    'the first starts',
  )
  const second = await startReplica('b', env('b'))
  t.teardown(() => second.child.kill('SIGKILL'))
  t.equal(await second.exited, 1, 'the second exits')
  t.match(second.output(), /another controller \(.+\) runs its own embedded OVN central/)
  t.match(second.output(), /OVN_NB_DB and OVN_SB_DB/, 'and says what replicas need instead')
  t.equal(first.child.exitCode, null, 'the first keeps running')
})

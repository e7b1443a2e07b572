/**
 * The attach ingress against a real Redis: a tenant's host PUT is prepared once — its
 * tenancy, validation, placement and quotas — reading the host, its group and its DPU
 * once each (as Redis itself sees the commands, by MONITOR), and a dry run and the write
 * take the same decision from the same prepared request.
 */
import type { Redis } from 'ioredis'
import t from 'tap'
import type { HostRequests, PreparedHost } from '../../app/hosts.ts'
import { ValidationError } from '../../app/index.ts'
import type { ManagedResourceSpec } from '../../lib/model/objects.ts'
import type { ChangePlan, Planner } from '../../lib/model/plans.ts'
import { DEFAULT_QUOTAS } from '../../lib/model/quotas.ts'
import { startContract } from '../api/contract.ts'
import type { Teardown } from '../helpers/stack.ts'

const TENANT = { kind: 'tenant', tenant: 'tenant-a' } as const
const HOST_KEY = 'hz:{store}:mr:host-1'
const GROUP_KEY = 'hz:{store}:rg:group-a'
const DPU_KEY = 'hz:{store}:dpu:dpu-1'

/** A planner that plans nothing but says which spec it was asked to plan. */
function specPlanner(): Planner & { readonly planned: ManagedResourceSpec[] } {
  const planned: ManagedResourceSpec[] = []
  const none = (notes: string[]): ChangePlan => ({
    dryRun: true,
    nb: { central: null, insert: [], update: [], delete: [] },
    frr: { announce: [], withdraw: [] },
    agentJobs: [],
    addresses: { allocate: [], release: [] },
    notes,
  })
  return {
    planned,
    group: async () => none([]),
    groupDeletion: async () => undefined,
    host: async (_name, spec) => {
      planned.push(spec)
      return none(['planned'])
    },
    hostDeletion: async () => undefined,
  }
}

/** A client on a private Redis with group-a and dpu-1 (tenant-a's) in its store. */
async function setUp(t: Teardown) {
  const planner = specPlanner()
  const { client, redis, store } = await startContract(t, { planner })
  const watcher = redis.duplicate()
  t.teardown(() => watcher.disconnect())
  await store.groups.put(
    'group-a',
    { tenantId: 'tenant-a', network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' } },
    DEFAULT_QUOTAS.default,
  )
  await store.dpus.put('dpu-1', {
    tenantId: 'tenant-a',
    fabricIps: ['172.18.0.11', '172.18.0.111'],
    hostPorts: ['pf0hpf'],
  })
  return { client, hosts: client.hosts, redis, watcher, planner, store }
}

/** A command as MONITOR reports it: its name (lowercased), its arguments, and who ran it. */
interface Command {
  readonly name: string
  readonly args: readonly string[]
  /** Run by a script (`lua`), not sent by a client. */
  readonly inScript: boolean
}

/**
 * Every command Redis runs while `work` runs, as MONITOR reports them. A PING with a
 * marker after `work` tells when all have arrived.
 */
async function commandsOf(
  redis: Redis,
  watcher: Redis,
  work: () => Promise<unknown>,
): Promise<Command[]> {
  const monitor = await watcher.monitor()
  const seen: Command[] = []
  const marker = `end-${Date.now()}`
  const done = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const [name = '', ...rest] = args
      if (name.toLowerCase() === 'ping' && rest[0] === marker) resolve()
      else seen.push({ name: name.toLowerCase(), args: rest, inScript: source === 'lua' })
    })
  })
  try {
    await work()
    await redis.ping(marker)
    await done
  } finally {
    monitor.disconnect()
  }
  return seen
}

const isScript = (c: Command) => c.name === 'evalsha' || c.name === 'eval'

/**
 * How often a client (not a script) sent a command naming `key`: in the whole request,
 * and at its ingress — before its first write (the first script it runs).
 */
function readsOf(commands: readonly Command[], key: string) {
  const write = commands.findIndex(isScript)
  const ingress = write < 0 ? commands : commands.slice(0, write)
  const count = (cs: readonly Command[]) =>
    cs.filter((c) => !c.inScript && !isScript(c) && c.args.includes(key)).length
  return { ingress: count(ingress), all: count(commands) }
}

const request = (hostMAC: string) => ({
  resourceGroup: 'group-a',
  hostMAC,
  dpu: { id: 'dpu-1' },
  identifier: 'pf0hpf',
})

t.test('a tenant attach reads its host, group and DPU once each', async (t) => {
  const { client, redis, watcher } = await setUp(t)
  const caller = { caller: TENANT }
  const cases = [
    ['a new host', '52:54:00:00:00:01'],
    // The name's owner, the group and the host as it was are one read each.
    ['a change to a host the tenant has', '52:54:00:00:00:02'],
  ] as const
  for (const [what, mac] of cases) {
    const commands = await commandsOf(redis, watcher, () =>
      client.applyHost('host-1', request(mac), caller),
    )
    // Once more after the write: the answer is the object as stored.
    t.same(readsOf(commands, HOST_KEY), { ingress: 1, all: 2 }, `${what}: the host`)
    t.same(readsOf(commands, GROUP_KEY), { ingress: 1, all: 1 }, `${what}: its group`)
    t.same(readsOf(commands, DPU_KEY), { ingress: 1, all: 1 }, `${what}: its DPU`)
  }
})

t.test('a dry run and the write decide the same from one prepared request', async (t) => {
  const { hosts, planner, store } = await setUp(t)
  const prepared: PreparedHost = await hosts.prepare(TENANT, 'host-1', request('52:54:00:00:00:01'))

  const plan = await hosts.plan(prepared)
  t.same(plan.notes, ['planned'])
  t.same(planner.planned, [prepared.host.spec], 'the plan is of the prepared spec')
  t.equal(await store.hosts.get('host-1'), undefined, 'planning stored nothing')

  const accepted = await hosts.apply(prepared)
  t.ok(accepted.jobId, 'host.attach enqueued')
  t.same((await store.hosts.get('host-1'))?.spec, planner.planned[0], 'the write stores that spec')

  // A request refused is refused once, before either: the dry run and the write alike.
  const refusal = (hosts: HostRequests) =>
    hosts.prepare(TENANT, 'host-2', { ...request('52:54:00:00:00:02'), dpu: { id: 'dpu-9' } })
  await t.rejects(refusal(hosts), ValidationError, 'a DPU the tenant lacks: refused in prepare')
  t.equal(planner.planned.length, 1, 'nothing more was planned')
})

/**
 * `reconcile` against stand-ins for the store, the group applier and the NB pool: which
 * group or central fails, or hangs, decides what the report says and whether the run
 * fails. The real centrals are in test/pipeline/reconcile-centrals.test.ts.
 */
import type { Job } from 'bullmq'
import t from 'tap'
import type { ResourceGroup } from '../lib/model/objects.ts'
import { CentralUnavailableError, type OvnCentralEndpoints } from '../lib/ovn/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { GroupGone } from './internal/group-apply.ts'
import { createReconcile, type ReconcileReport } from './reconcile.ts'

/** What a group's apply does: commit, find NB in sync, fail, or never answer. */
type Apply = 'changed' | 'same' | 'hang' | Error
/** What a central's NB does when searched for orphan rows. */
type Search = 'ok' | 'hang' | Error

interface Case {
  readonly name: string
  readonly groups: Readonly<Record<string, Apply>>
  /** Groups the store has but leaves to their own jobs (being deleted). */
  readonly deleting?: readonly string[]
  /** Per group's own central; missing: `ok`. */
  readonly centrals?: Readonly<Record<string, Search>>
  readonly report?: Partial<Record<keyof ReconcileReport, unknown>>
  /** The run fails as a whole with this code. */
  readonly fails?: string
}

const down = (group: string) =>
  new CentralUnavailableError(group, 'it did not start', { retryable: true })

const cases: Case[] = [
  {
    name: 'every group and central answers',
    groups: { 'group-a': 'changed', 'group-b': 'same' },
    report: {
      repaired: ['group-a'],
      inSync: ['group-b'],
      failed: [],
      unreachableCentrals: [],
      checkedGroups: 2,
    },
  },
  {
    name: "a group whose central is down fails alone; the other's drift is repaired",
    groups: { 'group-a': down('group-a'), 'group-b': 'changed' },
    report: {
      repaired: ['group-b'],
      inSync: [],
      failed: [
        {
          group: 'group-a',
          code: 'OVN_CENTRAL_UNAVAILABLE',
          message: 'OVN central of group group-a: it did not start',
          retryable: true,
        },
      ],
    },
  },
  {
    name: 'a group whose apply hangs is reported after the bound',
    groups: { 'group-a': 'hang', 'group-b': 'changed' },
    report: {
      repaired: ['group-b'],
      failed: [{ group: 'group-a', code: 'RECONCILE_TIMEOUT', message: /group group-a/ }],
    },
  },
  {
    name: 'a central whose NB hangs is reported; the others are searched',
    groups: { 'group-a': 'same', 'group-b': 'same' },
    centrals: { 'group-a': 'hang' },
    report: {
      inSync: ['group-a', 'group-b'],
      failed: [],
      unreachableCentrals: [
        {
          nb: 'unix:/centrals/group-a/nb.sock',
          group: 'group-a',
          service: 'central-group-a',
          code: 'RECONCILE_TIMEOUT',
        },
      ],
    },
  },
  {
    name: 'an error without a code is reported as UNEXPECTED',
    groups: { 'group-a': new Error('boom'), 'group-b': 'same' },
    report: { failed: [{ group: 'group-a', code: 'UNEXPECTED', message: 'boom' }] },
  },
  {
    name: 'a group deleted meanwhile, or being deleted, is skipped, not failed',
    groups: { 'group-a': new GroupGone('group-a'), 'group-b': 'same' },
    deleting: ['group-c'],
    report: { skipped: ['group-a', 'group-c'], failed: [], checkedGroups: 3 },
  },
  {
    name: 'nothing answers: the run fails',
    groups: { 'group-a': down('group-a'), 'group-b': 'hang' },
    centrals: { 'group-a': 'hang', 'group-b': new Error('connect ECONNREFUSED') },
    fails: 'RECONCILE_FAILED',
  },
]

const nbOf = (group: string) => `unix:/centrals/${group}/nb.sock`

function endpointsOf(group: string): OvnCentralEndpoints {
  return { nb: nbOf(group), sb: '', sbController: '', service: `central-${group}`, group }
}

/** Deps whose groups and centrals behave as `c` says; NB holds no orphan rows. */
function depsFor(
  c: Case,
): Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'groups' | 'children' | 'jobs' | 'agents'> {
  const never = new Promise<never>(() => {})
  const stored = [
    ...Object.keys(c.groups).map((name) => ({ name, spec: {}, status: { observedVersion: 1 } })),
    ...(c.deleting ?? []).map((name) => ({
      name,
      deletion: { requestedAt: '' },
      status: { observedVersion: 1 },
    })),
  ] as unknown as ResourceGroup[]
  const emptyNb = { transact: async () => [{ rows: [] }] }
  return {
    store: {
      groups: {
        list: async () => stored,
        get: async (name: string) => stored.find((g) => g.name === name),
      },
      hosts: { list: async () => [] },
      epoch: async () => 'epoch-1',
      events: { record: async () => {} },
    } as unknown as HandlerDeps['store'],
    children: { outcome: async () => ({ state: 'pending' }) } as unknown as HandlerDeps['children'],
    jobs: { add: async () => {} },
    // These centrals certify no chassis: reconcile has no DPU to send anything.
    agents: {} as HandlerDeps['agents'],
    groups: {
      apply: async (group: string) => {
        const apply = c.groups[group]
        if (apply === 'hang') return never
        if (apply instanceof Error) throw apply
        const changed = apply === 'changed'
        return {
          endpoints: endpointsOf(group),
          state: { members: [] },
          result: {
            changed,
            ops: 0,
            attempts: 1,
            touched: changed ? ['Logical_Router/lr'] : [],
            drifted: changed ? ['Logical_Router/lr'] : [],
          },
        }
      },
    } as unknown as HandlerDeps['groups'],
    ovn: {
      ensure: async (group: string) => endpointsOf(group),
      release: async () => {},
      list: async () => Object.keys(c.groups).map(endpointsOf),
      groups: async () => Object.keys(c.groups),
    },
    nb: {
      get: async (nb: string) => {
        const group = Object.keys(c.groups).find((g) => nbOf(g) === nb) ?? ''
        const search = c.centrals?.[group] ?? 'ok'
        if (search === 'hang') return never
        if (search instanceof Error) throw search
        return { client: emptyNb, cache: {} } as unknown as Awaited<
          ReturnType<HandlerDeps['nb']['get']>
        >
      },
      drop: async () => {},
    },
  }
}

for (const c of cases) {
  t.test(c.name, async (t) => {
    const reconcile = createReconcile(depsFor(c), { timeoutMs: 50 })
    // One bound (50 ms) for the applies, one for the searches, whatever hangs: the run
    // settles long before this, or something held it.
    let timer: NodeJS.Timeout | undefined
    const held = new Promise<'held'>((resolve) => {
      timer = setTimeout(() => resolve('held'), 20_000)
    })
    const run = reconcile({} as Job)
    const settled = await Promise.race([
      run.then(
        () => 'settled',
        () => 'settled',
      ),
      held,
    ])
    clearTimeout(timer)
    t.equal(settled, 'settled', 'a hung group or central does not hold the run')
    if (c.fails) {
      await t.rejects(run, { code: c.fails })
    } else {
      t.match(await run, c.report ?? {})
    }
  })
}

t.test('a timeout or concurrency that cannot work throws when the handler is made', async (t) => {
  const deps = depsFor(cases[0] as Case)
  t.throws(() => createReconcile(deps, { timeoutMs: 0 }), { code: 'CONFIG_INVALID' })
  t.throws(() => createReconcile(deps, { concurrency: 0 }), { code: 'CONFIG_INVALID' })
})

t.test('each failure is logged', async (t) => {
  const lines: string[] = []
  const c = cases[3] as Case
  const reconcile = createReconcile(depsFor(c), { timeoutMs: 50, log: (l) => lines.push(l) })
  await reconcile({} as Job)
  t.match(lines, [/NB unix:\/centrals\/group-a\/nb\.sock \(group group-a\).*RECONCILE_TIMEOUT/])
})

import t from 'tap'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import { HOSTS_NOT_READY, statusFromHosts } from './group-hosts.ts'

const STAMP = '2024-01-01T00:00:00.000Z'
const host = (name: string, status: Partial<ManagedResource['status']> = {}) =>
  storedHost(name, {}, status)
const failed = (name: string) =>
  host(name, {
    phase: 'Failed',
    configsSynced: false,
    conditions: [
      {
        type: 'Attached',
        status: 'False',
        reason: 'POOL_EXHAUSTED',
        message: 'no address',
        lastTransitionTime: STAMP,
      },
    ],
  })

t.test('a change on its way to any host makes the group Configuring, not synced', async (t) => {
  const group = storedGroup()
  const next = statusFromHosts(group, [
    host('h1'),
    host('h2', { phase: 'Attaching', configsSynced: false }),
  ])
  t.match(next, { phase: 'Configuring', configsSynced: false })
  t.match(
    statusFromHosts(group, [host('h1', { phase: 'Detaching', configsSynced: false })]),
    { phase: 'Configuring' },
    'a detach on its way too',
  )
})

t.test(
  'every host Ready: the group is Ready and synced; nothing to write when it says so',
  async (t) => {
    const configuring = storedGroup('group-a', {}, { phase: 'Configuring', configsSynced: false })
    t.match(statusFromHosts(configuring, [host('h1'), host('h2')]), {
      phase: 'Ready',
      configsSynced: true,
    })
    t.equal(statusFromHosts(storedGroup(), [host('h1')]), undefined, 'already Ready: no write')
    t.equal(statusFromHosts(storedGroup(), []), undefined, 'no host: Ready as it is')
  },
)

t.test(
  'a host failed for a reason of its own: Ready and Degraded, naming it; gone once it is fine',
  async (t) => {
    const next = statusFromHosts(storedGroup(), [host('h1'), failed('h2')])
    t.match(next, { phase: 'Ready', configsSynced: true })
    const degraded = next?.conditions.find((c) => c.type === 'Degraded')
    t.match(degraded, { status: 'True', reason: HOSTS_NOT_READY })
    t.match(degraded?.message, /1 of 2 hosts not Ready: h2 \(Failed: POOL_EXHAUSTED\)/)

    const unhealthy = host('h3', {
      conditions: [
        {
          type: 'DpuHealthy',
          status: 'False',
          reason: 'HeartbeatMissed',
          message: 'silent',
          lastTransitionTime: STAMP,
        },
      ],
    })
    t.match(
      statusFromHosts(storedGroup(), [unhealthy])?.conditions.find((c) => c.type === 'Degraded')
        ?.message,
      /h3 \(DpuHealthy=False: HeartbeatMissed\)/,
      'a host whose DPU is unhealthy is named',
    )

    const recovered = statusFromHosts({ ...storedGroup(), status: next ?? storedGroup().status }, [
      host('h1'),
      host('h2'),
    ])
    t.same(
      recovered?.conditions.filter((c) => c.type === 'Degraded'),
      [],
      'every host Ready again: Degraded is gone',
    )
  },
)

t.test(
  "the group's own steps are its own: Provisioning, Terminating, Failed, a deletion",
  async (t) => {
    const attaching = [host('h1', { phase: 'Attaching', configsSynced: false })]
    for (const phase of ['Provisioning', 'Terminating', 'Failed'] as const) {
      t.equal(statusFromHosts(storedGroup('g', {}, { phase }), attaching), undefined, phase)
    }
    const deleting = { ...storedGroup(), deletion: { requestedAt: STAMP, force: false } }
    t.equal(statusFromHosts(deleting, attaching), undefined, 'being deleted')
  },
)

t.test("the topology's Degraded is kept: the hosts' never replaces it", async (t) => {
  const topology = storedGroup(
    'group-a',
    {},
    {
      conditions: [
        {
          type: 'Degraded',
          status: 'True',
          reason: 'TopologyIncomplete',
          message: 'host h9 left out',
          lastTransitionTime: STAMP,
        },
      ],
    },
  )
  t.equal(statusFromHosts(topology, [failed('h2')]), undefined)
})

t.test('a group spec not yet provisioned is not synced, whatever its hosts', async (t) => {
  const newer = {
    ...storedGroup('group-a', {}, { phase: 'Configuring', configsSynced: false }),
    specVersion: 2,
  }
  t.match(statusFromHosts(newer, [host('h1')]), { phase: 'Ready', configsSynced: false })
})

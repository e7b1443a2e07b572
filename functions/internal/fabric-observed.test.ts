import t from 'tap'
import type { Heartbeat, ObservedVrf } from '../../lib/agent-protocol/index.ts'
import type { HostPhase, ManagedResource } from '../../lib/model/objects.ts'
import { storedHost } from '../../test/helpers/objects.ts'
import { fabricHostsMissing, strayFabric } from './fabric-observed.ts'

const T0 = Date.parse('2024-05-01T12:00:00.000Z')
const iso = (ms: number) => new Date(T0 + ms).toISOString()

/** A Fabric host of `group` on dpu-1's `port`, acked in `vrf` (unless `acked: false`). */
function host(
  name: string,
  port: string,
  opts: {
    group?: string
    vrf?: string
    announced?: string[]
    phase?: HostPhase
    acked?: boolean
    deletion?: boolean
    changedAt?: number
  } = {},
): ManagedResource {
  const stored = storedHost(
    name,
    { resourceGroup: opts.group ?? 'fab-a', identifier: port },
    {
      phase: opts.phase ?? 'Ready',
      conditions: [
        {
          type: 'AgentConfigured',
          status: 'True',
          reason: 'RoutesAnnounced',
          message: '',
          lastTransitionTime: iso(opts.changedAt ?? 0),
        },
      ],
      ...(opts.acked === false
        ? {}
        : {
            agent: {
              hostPort: port,
              ovnInstalled: false,
              specVersion: 1,
              vrf: opts.vrf ?? 'hzv7',
              announced: opts.announced ?? [],
            },
          }),
    },
  )
  return opts.deletion ? { ...stored, deletion: { requestedAt: iso(0), force: false } } : stored
}

const vrf = (ports: string[], announced: string[], more: Partial<ObservedVrf> = {}) => ({
  group: 'fab-a',
  vrf: 'hzv7',
  vni: 7,
  ports,
  announced,
  ...more,
})

function beat(atMs: number, vrfs: ObservedVrf[] | undefined): Heartbeat {
  return {
    dpuId: 'dpu-1',
    agentVersion: '1',
    protocolVersions: ['2.0', '3.0'],
    fabricIps: [],
    at: iso(atMs),
    intervalMs: 1000,
    observed: {
      chassis: 'dpu-1',
      bridges: [],
      ovnRemote: null,
      ovnController: { running: false, connected: false },
      boundPorts: [],
      relays: [],
      ...(vrfs ? { vrfs } : {}),
    },
  }
}

t.test('a Ready Fabric host whose VRF, port or /32 the DPU no longer shows', async (t) => {
  const a1 = host('a1', 'p1', { announced: ['10.0.0.11/32'] })
  const cases: [string, ObservedVrf[] | undefined, string | undefined][] = [
    ['everything there', [vrf(['p1'], ['10.0.0.11/32'])], undefined],
    ['its /32 not announced', [vrf(['p1'], [])], 'the announcement of 10.0.0.11/32'],
    ['its port out of the VRF', [vrf([], ['10.0.0.11/32'])], 'port p1 in VRF hzv7'],
    ['its VRF gone', [], 'VRF hzv7'],
    ['an agent that reports no VRFs (no Fabric)', undefined, undefined],
  ]
  for (const [what, vrfs, missing] of cases) {
    const found = fabricHostsMissing('dpu-1', beat(5000, vrfs), [a1])
    t.same(
      found,
      missing ? [{ host: 'a1', vrf: 'hzv7', missing }] : [],
      `${what}: ${missing ?? 'nothing missing'}`,
    )
  }
  const gone = beat(5000, [])
  t.same(fabricHostsMissing('dpu-1', beat(1500, []), [a1]), [], 'not within the grace')
  t.same(fabricHostsMissing('dpu-2', gone, [a1]), [], "another DPU's beat")
  for (const other of [
    host('a1', 'p1', { phase: 'Configuring' }),
    host('a1', 'p1', { acked: false }),
    host('a1', 'p1', { deletion: true }),
  ]) {
    t.same(fabricHostsMissing('dpu-1', gone, [other]), [], 'not Ready, never acked, detaching')
  }
})

t.test("what a DPU's VRFs hold that no live host wants", async (t) => {
  const a1 = host('a1', 'p1', { announced: ['10.0.0.11/32'] })
  t.same(strayFabric('dpu-1', beat(0, [vrf(['p1'], ['10.0.0.11/32'])]), [a1]), [], 'all wanted')
  t.same(
    strayFabric('dpu-1', beat(0, [vrf(['p1', 'p2'], ['10.0.0.11/32', '10.0.0.12/32'])]), [a1]),
    [
      {
        key: 'fabric:hzv7/p2',
        group: 'fab-a',
        vrf: 'hzv7',
        vni: 7,
        port: 'p2',
        addresses: ['10.0.0.12'],
      },
    ],
    'a port no host holds, with the /32 no host wants',
  )
  const ghost = vrf(['p3'], ['10.9.0.5/32'], { group: 'ghost', vrf: 'hzv99', vni: 99 })
  t.match(
    strayFabric('dpu-1', beat(0, [ghost]), [a1]),
    [{ key: 'fabric:hzv99/p3', group: 'ghost', port: 'p3', addresses: ['10.9.0.5'] }],
    'a VRF of a group the controller does not know: its port goes (the VRF with it)',
  )
  t.same(
    strayFabric('dpu-1', beat(0, [vrf([], [], { group: 'old', vrf: 'hzv8', vni: 8 })]), [a1]),
    [{ key: 'fabric:hzv8', group: 'old', vrf: 'hzv8', vni: 8, addresses: [] }],
    'an empty VRF no host wants',
  )
  t.same(
    strayFabric('dpu-1', beat(0, [vrf(['p2'], [])]), [host('a2', 'p2', { acked: false })]),
    [],
    'the port of a host whose configure is still running is wanted',
  )
  t.same(
    strayFabric('dpu-1', beat(0, [vrf(['p2'], [])]), [host('a2', 'p2', { deletion: true })]),
    [],
    "a detaching host's port is left to its detach",
  )
  t.same(strayFabric('dpu-1', beat(0, undefined), [a1]), [], 'no VRFs reported')
})

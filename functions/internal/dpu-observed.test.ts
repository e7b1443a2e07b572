import t from 'tap'
import type { DpuState } from '../../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../../lib/agent-protocol/index.ts'
import type { Condition, HostPhase, ManagedResource } from '../../lib/model/objects.ts'
import { storedHost } from '../../test/helpers/objects.ts'
import {
  type BoundPort,
  dpuHealthyCondition,
  hostsMissingPort,
  portsItMayHold,
  strayOwner,
  strayPorts,
} from './dpu-observed.ts'

const T0 = Date.parse('2024-05-01T12:00:00.000Z')
const iso = (ms: number) => new Date(T0 + ms).toISOString()

function host(
  name: string,
  opts: {
    dpu?: string
    phase?: HostPhase
    agentReason?: string
    changedAt?: number
    deletion?: boolean
    ref?: false | { dpu: string; logicalPort?: string }
  } = {},
): ManagedResource {
  const dpu = opts.dpu ?? 'dpu-1'
  const conditions: Condition[] = [
    {
      type: 'AgentConfigured',
      status: opts.agentReason === 'PortInstalled' ? 'True' : 'False',
      reason: opts.agentReason ?? 'PortInstalled',
      message: '',
      lastTransitionTime: iso(opts.changedAt ?? 0),
    },
  ]
  const ref =
    opts.ref === false
      ? undefined
      : {
          dpu: opts.ref?.dpu ?? dpu,
          logicalPort: opts.ref?.logicalPort ?? `hz/group-a/${name}`,
        }
  return {
    ...storedHost(
      name,
      { dpu: { id: dpu, ips: ['172.18.0.11'] } },
      {
        phase: opts.phase ?? 'Ready',
        conditions,
        ...(ref ? { logicalPortReference: ref } : {}),
        observedVersion: 3,
      },
    ),
    specVersion: 3,
    ...(opts.deletion ? { deletion: { requestedAt: iso(0), force: false } } : {}),
    createdAt: iso(0),
    updatedAt: iso(0),
  }
}

const bound = (logicalPort: string, port = 'pf0hpf'): BoundPort => ({
  port,
  logicalPort,
  group: 'group-a',
  ovnInstalled: true,
})

function beat(atMs: number, ports: BoundPort[], intervalMs = 1000): Heartbeat {
  return {
    dpuId: 'dpu-1',
    agentVersion: '1',
    protocolVersions: ['2.0'],
    fabricIps: [],
    at: iso(atMs),
    intervalMs,
    observed: {
      chassis: 'dpu-1',
      bridges: [],
      ovnRemote: null,
      ovnController: { running: true, connected: true },
      boundPorts: ports,
      relays: [],
    },
  }
}

t.test('DpuHealthy follows the DPU state, written only when it changes', async (t) => {
  const b = beat(0, [])
  const lost = {
    status: 'False',
    reason: 'HeartbeatLost',
    message: `no heartbeat from DPU dpu-1 since ${b.at} (one is expected every 1000 ms); the host keeps what its DPU was last given`,
  } as const
  const resumed = {
    status: 'True',
    reason: 'HeartbeatResumed',
    message: 'DPU dpu-1 heartbeats again',
  } as const
  const cases: [
    string,
    Pick<Condition, 'status' | 'reason' | 'message'> | undefined,
    DpuState,
    object | undefined,
  ][] = [
    ['Lost, none yet: False HeartbeatLost, since when', undefined, 'Lost', lost],
    ['Lost, already said so: nothing to write', lost, 'Lost', undefined],
    ['Lost after a resume: False again', resumed, 'Lost', lost],
    ['Online after Lost: True HeartbeatResumed', lost, 'Online', resumed],
    ['Online, already resumed: nothing', resumed, 'Online', undefined],
    ['Online, never unhealthy: no condition at all', undefined, 'Online', undefined],
    ['Stale: left as it is (one late beat)', lost, 'Stale', undefined],
    ['Stale, none yet: still none', undefined, 'Stale', undefined],
  ]
  for (const [what, current, state, expected] of cases) {
    const next = dpuHealthyCondition(current, 'dpu-1', b, state)
    if (expected === undefined) t.equal(next, undefined, what)
    else t.match(next, { type: 'DpuHealthy', ...expected }, what)
  }
  const revoked = { at: '2024-01-01T00:00:00.000Z', bytes: 2_000_000 }
  for (const state of ['Online', 'Stale', 'Lost'] as const) {
    t.match(
      dpuHealthyCondition(resumed, 'dpu-1', b, state, revoked),
      { status: 'False', reason: 'CredentialsRevoked', message: /held 2000000 bytes/ },
      `${state} with its credentials revoked: False CredentialsRevoked`,
    )
  }
  const said = dpuHealthyCondition(undefined, 'dpu-1', b, 'Lost', revoked)
  t.equal(
    dpuHealthyCondition(said, 'dpu-1', b, 'Lost', revoked),
    undefined,
    'said already: nothing to write (a lost heartbeat does not hide it)',
  )
  t.match(
    dpuHealthyCondition(said, 'dpu-1', b, 'Online'),
    resumed,
    'issued again and beating: True HeartbeatResumed',
  )
})

t.test('a host whose port the DPU lost, and only such a host', async (t) => {
  const later = 5000 // the beat: 5 s after the hosts last changed, grace 2 s
  const cases: [string, ManagedResource, BoundPort[], number, boolean][] = [
    ['Ready, its port gone', host('h1'), [], later, true],
    ['Ready, its port there', host('h1'), [bound('hz/group-a/h1')], later, false],
    ['Ready, but the beat is within the grace after its change', host('h1'), [], 1500, false],
    ['Ready, the beat older than its change', host('h1', { changedAt: 9000 }), [], later, false],
    [
      'Configuring after an ack (NotBoundInSouthbound)',
      host('h1', { phase: 'Configuring', agentReason: 'NotBoundInSouthbound' }),
      [],
      later,
      true,
    ],
    [
      'Configuring, waiting for the agent',
      host('h1', { phase: 'Configuring', agentReason: 'AwaitingAgent' }),
      [],
      later,
      false,
    ],
    [
      'Configuring, already being repaired',
      host('h1', { phase: 'Configuring', agentReason: 'PortLost' }),
      [],
      later,
      false,
    ],
    ['Attaching', host('h1', { phase: 'Attaching' }), [], later, false],
    ['Failed', host('h1', { phase: 'Failed' }), [], later, false],
    ['being detached', host('h1', { deletion: true }), [], later, false],
    ['on another DPU', host('h1', { dpu: 'dpu-2' }), [], later, false],
    [
      'its reference still on another DPU (moving)',
      host('h1', { ref: { dpu: 'dpu-2' } }),
      [],
      later,
      false,
    ],
    ['no logical port yet', host('h1', { ref: false }), [], later, false],
  ]
  for (const [what, h, ports, at, expected] of cases) {
    const missing = hostsMissingPort('dpu-1', beat(at, ports), [h])
    t.same(missing, expected ? [{ host: 'h1', logicalPort: 'hz/group-a/h1' }] : [], what)
  }
})

t.test('a bound port nothing wants on the DPU is a stray', async (t) => {
  const hosts = [
    host('h1'),
    host('h2', { ref: false }), // attaching: wanted before it has a status reference
    host('gone', { deletion: true }),
    host('moved', { dpu: 'dpu-2' }),
  ]
  const ports = [
    bound('hz/group-a/h1'),
    bound('hz/group-a/h2', 'pf1hpf'),
    bound('hz/group-a/gone', 'pf2hpf'),
    bound('hz/group-a/moved', 'pf3hpf'),
    bound('hz/group-a/ghost', 'pf4hpf'),
    bound('made-by-hand', 'pf5hpf'),
  ]
  const strays = strayPorts('dpu-1', beat(0, ports), hosts)
  t.same(
    strays.map((p) => p.logicalPort),
    ['hz/group-a/moved', 'hz/group-a/ghost', 'made-by-hand'],
    "wanted and detaching hosts' ports are not strays",
  )
  t.same(
    strays.map((p) => strayOwner(p, hosts, 'dpu-1')),
    [
      { name: 'moved', specVersion: 3, known: false },
      { name: 'ghost', specVersion: 0, known: false },
      { name: 'made-by-hand', specVersion: 0, known: false },
    ],
    'each named for the isolate: its stored host, else from its logical port; a host of another DPU is not known to this one (its history is not written)',
  )
  const here = host('here')
  const own = strayOwner(bound('hz/group-a/here'), [here], 'dpu-1')
  t.same(own, { name: 'here', specVersion: 3, known: true }, 'a host of this DPU is known')
})

t.test('a DPU holds only ports the inventory gives it, each once', async (t) => {
  const made = Array.from({ length: 50 }, (_, i) => bound(`hz/group-a/made-up-${i}`, `fake${i}`))
  const real = bound('hz/group-a/h1', 'pf0hpf')
  const cases: [string, BoundPort[], string[] | undefined, BoundPort[], number][] = [
    ['50 made-up ports beside a real one', [real, ...made], ['pf0hpf', 'pf1hpf'], [real], 50],
    ['a port reported twice', [real, bound('hz/group-a/h2', 'pf0hpf')], ['pf0hpf'], [real], 1],
    ['no host ports in the inventory: its own default', [real], [], [real], 0],
    ['…each port once', [real, { ...real, logicalPort: 'x' }], undefined, [real], 1],
  ]
  for (const [name, ports, hostPorts, held, ignored] of cases) {
    const got = portsItMayHold(beat(0, ports), hostPorts)
    t.same(got.held, held, name)
    t.equal(got.ignored.length, ignored, `${name}: ${ignored} ignored`)
  }
})

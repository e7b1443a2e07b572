/**
 * A DPU binds only what is its hosts': the ports on its `--host-ports` list, never a
 * bridge, the uplink or the management port; never a port someone else made or one of
 * another bridge; never a host port bound to another host's logical port; and a relay
 * port name another group holds stays that group's. Each refusal leaves the DPU exactly
 * as it was.
 */
import { join } from 'node:path'
import t from 'tap'
import { jobSentKey } from '../../agent/ovs.ts'
import { startAgentRuntime } from '../../agent/runtime.ts'
import { run } from '../../infra/lab/dpu.ts'
import {
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type ConfigureInput,
  type IsolateAck,
  relayPortName,
} from '../../lib/agent-protocol/index.ts'
import { processesMentioning } from '../helpers/processes.ts'
import { until } from '../pipeline/fixtures.ts'
import { type AgentLab, dpuState, HOST_MAC, RELAY_MAC, startAgentLab } from './fixture.ts'

type Outcome =
  | { readonly ack: ConfigureAck | IsolateAck; readonly error?: undefined }
  | { readonly ack?: undefined; readonly error: string; readonly attempts: number }

let jobs = 0
/** Runs one agent job (up to `attempts` times) and says how it ended. */
async function outcome(
  lab: AgentLab,
  name: 'configure' | 'isolate',
  data: unknown,
  attempts = 3,
): Promise<Outcome> {
  const job = await lab.queue.add(name, data, {
    jobId: `${name}-${jobs++}`,
    attempts,
    backoff: { type: 'fixed', delay: 100 },
  })
  try {
    return { ack: (await job.waitUntilFinished(lab.events, 60_000)) as ConfigureAck | IsolateAck }
  } catch (err) {
    const failed = await lab.queue.getJob(job.id ?? '')
    return { error: String(err), attempts: failed?.attemptsMade ?? -1 }
  }
}

t.test('a DPU binds only its own host ports, and never moves or rebinds one', async (t) => {
  const lab = await startAgentLab(t)
  const { dpu } = lab
  const configure = (input: ConfigureInput) =>
    outcome(lab, 'configure', buildConfigurePayload('2.0', input))
  const withPort = (hostPort: string, host: Partial<ConfigureInput['host']> = {}) => ({
    ...lab.input,
    host: { ...lab.input.host, ...host, hostPort },
  })

  // The operator's DPU: a management interface OVS does not hold, and a bridge of its own
  // whose port has a host-port name.
  await run('ip', ['-n', dpu.netns, 'link', 'add', 'oob_net0', 'type', 'veth', 'peer', 'oobpeer'])
  await run('ip', ['-n', dpu.netns, 'link', 'add', 'pf0vf3', 'type', 'veth', 'peer', 'vf3peer'])
  await dpu.vsctl(
    'add-br',
    'br-ext',
    '--',
    'set',
    'Bridge',
    'br-ext',
    'datapath_type=netdev',
    '--',
    'add-port',
    'br-ext',
    'pf0vf3',
  )
  // Two relay uplinks: a second group's relay is refused for its name, not for want of one.
  const uplinks = [...lab.config().relayUplinkIps, `${lab.fabric.allocateIp()}/24`]
  const runtime = await startAgentRuntime(lab.config({ relayUplinkIps: uplinks }), (line) =>
    console.error(line),
  )
  lab.later(() => runtime.stop())
  t.same(runtime.agent.config.hostPorts, dpu.hostPorts)

  await t.test(
    'a job naming a bridge, the uplink or the management port changes nothing',
    async (t) => {
      const pristine = await dpuState(dpu)
      t.same(pristine.bridges['br-phy'], [dpu.uplinkInterface], 'before: the uplink in br-phy')
      for (const port of [dpu.uplinkBridge, dpu.uplinkInterface, 'br-int', 'oob_net0', 'br-ext']) {
        const result = await configure(withPort(port))
        t.match(result, {
          error: new RegExp(`AGENT_HOST_PORT_NOT_ALLOWED: DPU ${lab.dpuId}: ${port} is not one of`),
          attempts: 1,
        })
        t.same(await dpuState(dpu), pristine, `${port}: bridges, ports and settings unchanged`)
      }
      const isolate = buildIsolatePayload('1.0', {
        dpuId: lab.dpuId,
        specVersion: 1,
        group: { name: lab.input.group.name },
        host: {
          name: 'h1',
          logicalPort: lab.input.host.logicalPort,
          hostPort: dpu.uplinkInterface,
        },
      })
      t.match(await outcome(lab, 'isolate', isolate), {
        error: /AGENT_HOST_PORT_NOT_ALLOWED/,
        attempts: 1,
      })
      t.same(await dpuState(dpu), pristine, 'isolate: unchanged')
      t.equal((await dpu.vsctl('port-to-br', dpu.uplinkInterface)).trim(), dpu.uplinkBridge)
      t.equal(runtime.agent.ovnController.running, false, 'no ovn-controller was started')
      const ping = await run('ip', [
        'netns',
        'exec',
        dpu.netns,
        'ping',
        '-c1',
        '-W2',
        lab.fabric.gatewayIp,
      ])
      t.match(ping, /1 received/, 'the DPU still reaches the fabric over br-phy')
    },
  )

  await t.test('an allowed name that is a port of another bridge is never moved', async (t) => {
    const before = await dpuState(dpu)
    t.ok(dpu.hostPorts.includes('pf0vf3'), 'pf0vf3 is on the allow-list')
    const result = await configure(withPort('pf0vf3'))
    t.match(result, {
      error: /AGENT_HOST_PORT_NOT_OURS: .*pf0vf3 is a port of br-ext that Hydrazine did not make/,
      attempts: 1,
    })
    t.same(await dpuState(dpu), before, 'unchanged')
    t.equal((await dpu.vsctl('port-to-br', 'pf0vf3')).trim(), 'br-ext')
  })

  const relayPort = 'hzr0000002a'
  await t.test('the relay port is the one the controller named', async (t) => {
    const relay = lab.input.group.relay
    if (!relay) throw new Error('the lab group has a relay')
    const result = await configure({
      ...lab.input,
      group: { ...lab.input.group, relay: { ...relay, portName: relayPort } },
    })
    t.match(result, { ack: { hostPort: lab.host.hostPort, relayPort, ovnInstalled: true } })
    t.equal((await dpu.vsctl('port-to-br', relayPort)).trim(), 'br-int')
    t.equal((await dpu.vsctl('port-to-br', `${relayPort}u`)).trim(), dpu.uplinkBridge)
    t.same((await dpuState(dpu)).relayNamespaces, [`${dpu.netns}-${relayPort}`])
    t.equal(await lab.boundChassis(relay.logicalPort), lab.dpuId, 'relay LSP bound')
  })

  // A second host's logical port in the group, with the MAC of the same machine.
  const h2 = `${lab.input.group.name}-h2`
  await lab.nbctl(
    'lsp-add',
    lab.input.group.name,
    h2,
    '--',
    'lsp-set-addresses',
    h2,
    `${HOST_MAC} 10.10.10.3`,
  )
  await lab.nbctl('--wait=sb', 'sync')

  await t.test('a port someone else put in br-int is not taken over', async (t) => {
    await dpu.vsctl(
      'add-port',
      'br-int',
      'pf0vf2',
      '--',
      'set',
      'Interface',
      'pf0vf2',
      'type=internal',
      `external_ids:iface-id=${h2}`,
    )
    const before = await dpuState(dpu)
    const result = await configure(withPort('pf0vf2', { name: 'h2', logicalPort: h2 }))
    t.match(result, {
      error: /AGENT_HOST_PORT_NOT_OURS: .*pf0vf2 is a port of br-int that Hydrazine did not make/,
      attempts: 1,
    })
    t.same(await dpuState(dpu), before, 'unchanged: no hydrazine ids added')
    await dpu.vsctl('del-port', 'br-int', 'pf0vf2')
  })

  await t.test("a second host's configure does not rebind a bound port", async (t) => {
    const before = await dpuState(dpu)
    const result = await configure(withPort(lab.host.hostPort, { name: 'h2', logicalPort: h2 }))
    t.match(result, {
      error: new RegExp(
        `DPU ${lab.dpuId}: ${lab.host.hostPort} is bound to ${lab.input.host.logicalPort}; ` +
          `isolate it before binding ${h2}`,
      ),
    })
    t.equal(result.error !== undefined && result.attempts, 3, 'retryable: an isolate may be queued')
    t.same(await dpuState(dpu), before, 'unchanged')
    t.match(
      await dpu.vsctl('get', 'Interface', lab.host.hostPort, 'external_ids:iface-id'),
      lab.input.host.logicalPort,
    )
    t.equal(await lab.boundChassis(lab.input.host.logicalPort), lab.dpuId, 'h1 still bound here')
    t.equal(await lab.boundChassis(h2), '', 'h2 not bound')
  })

  await t.test("another group's relay port name is not taken", async (t) => {
    const before = await dpuState(dpu)
    const result = await configure({
      ...lab.input,
      group: {
        ...lab.input.group,
        name: 'tenant-b',
        relay: { logicalPort: 'tenant-b-relay', mac: '0a:00:00:00:02:fe', portName: relayPort },
      },
      host: {
        name: 'b1',
        logicalPort: 'tenant-b-b1',
        mac: '0a:00:00:00:02:01',
        hostPort: 'pf1hpf',
      },
    })
    t.match(result, {
      error: new RegExp(
        `AGENT_RELAY_PORT_CONFLICT: .*relay port ${relayPort} for group tenant-b is taken by ` +
          'hydrazine:group=tenant-a',
      ),
      attempts: 1,
    })
    t.same(await dpuState(dpu), before, 'unchanged')
    t.equal(runtime.agent.relays.isRunning(lab.input.group.name), true, "tenant-a's relay runs")
  })

  await t.test("an isolate of another host leaves this host's binding alone", async (t) => {
    const before = await dpuState(dpu)
    const isolate = buildIsolatePayload('1.0', {
      dpuId: lab.dpuId,
      specVersion: 1,
      group: { name: 'tenant-b' },
      host: { name: 'b9', logicalPort: 'tenant-b-b9', hostPort: lab.host.hostPort },
    })
    const result = await outcome(lab, 'isolate', isolate)
    t.match(result, { ack: { unbound: true } })
    const after = await dpuState(dpu)
    // What it keeps is that b9 was isolated: a configure of b9 sent before it is refused.
    const note = `${jobSentKey('tenant-b-b9')}=`
    t.ok(
      after.notes.some((n) => n.startsWith(note)),
      'the isolate is recorded for b9',
    )
    t.same(
      { ...after, notes: after.notes.filter((n) => !n.startsWith(note)) },
      before,
      'and nothing else changed',
    )
    t.equal(await lab.boundChassis(lab.input.host.logicalPort), lab.dpuId, 'h1 still bound here')
  })

  await t.test('isolate, then configure: a new host on the same port', async (t) => {
    const isolate = buildIsolatePayload('1.0', {
      dpuId: lab.dpuId,
      specVersion: 2,
      group: { name: lab.input.group.name },
      host: { name: 'h1', logicalPort: lab.input.host.logicalPort, hostPort: lab.host.hostPort },
    })
    t.match(await outcome(lab, 'isolate', isolate), {
      ack: { unbound: true, relayStopped: relayPort },
    })
    t.same((await dpuState(dpu)).relayNamespaces, [], 'the relay found by its records is gone')
    t.same(await processesMentioning(join(lab.config().runDir, `dhcrelay-${relayPort}.pid`)), [])

    // No portName (an older controller): the relay port is named by hash.
    const result = await configure(withPort(lab.host.hostPort, { name: 'h2', logicalPort: h2 }))
    const hashed = relayPortName(lab.input.group.name)
    t.match(result, { ack: { hostPort: lab.host.hostPort, relayPort: hashed, ovnInstalled: true } })
    t.equal(await lab.boundChassis(h2), lab.dpuId, 'h2 bound here')
    t.equal(await lab.boundChassis(lab.input.host.logicalPort), '', 'h1 not')
  })

  await t.test('a relay port the controller renames is replaced, not doubled', async (t) => {
    const relay = lab.input.group.relay
    if (!relay) throw new Error('the lab group has a relay')
    const renamed = 'hzr0000002b'
    const result = await configure({
      ...withPort(lab.host.hostPort, { name: 'h2', logicalPort: h2 }),
      specVersion: 3,
      group: { ...lab.input.group, relay: { ...relay, portName: renamed } },
    })
    t.match(result, { ack: { relayPort: renamed, ovnInstalled: true } })
    const state = await dpuState(dpu)
    t.same(state.relayNamespaces, [`${dpu.netns}-${renamed}`])
    t.same(state.bridges['br-int'], [lab.host.hostPort, renamed].sort())
    t.same(state.bridges[dpu.uplinkBridge], [dpu.uplinkInterface, `${renamed}u`].sort())
    t.equal(runtime.agent.relays.list().length, 1, 'one relay')
    t.equal(runtime.agent.relays.list()[0]?.port, renamed)
    t.match(await run('ip', ['-n', `${dpu.netns}-${renamed}`, 'link', 'show', renamed]), RELAY_MAC)
  })

  await t.test('a configure is acked only once ovn-controller installed its port', async (t) => {
    const relay = lab.input.group.relay
    if (!relay) throw new Error('the lab group has a relay')
    const group = lab.input.group.name
    const h3 = `${group}-h3`
    const mac = '0a:00:00:00:01:03'
    const extra = await dpu.addHost({ name: 'h3', mac })
    const job = await lab.queue.add(
      'configure',
      buildConfigurePayload('2.0', {
        ...withPort(extra.hostPort, { name: 'h3', logicalPort: h3, mac }),
        specVersion: 3,
        group: { ...lab.input.group, relay: { ...relay, portName: 'hzr0000002b' } },
      }),
      { jobId: `configure-${jobs++}`, attempts: 1 },
    )
    const ids = () => dpu.vsctl('--if-exists', 'get', 'Interface', extra.hostPort, 'external_ids')
    // Its logical port is not in the NB yet: ovn-controller can neither bind nor install it.
    await until(ids, (found) => found.includes(h3))
    await new Promise((r) => setTimeout(r, 1000))
    t.notMatch(await ids(), /ovn-installed/, 'the port is not installed')
    t.equal(await job.getState(), 'active', 'so the job is not acked: it waits')
    await lab.nbctl('lsp-add', group, h3, '--', 'lsp-set-addresses', h3, `${mac} 10.10.10.4`)
    const ack = (await job.waitUntilFinished(lab.events, 20_000)) as ConfigureAck
    t.match(ack, { hostPort: extra.hostPort, ovnInstalled: true }, 'acked once installed')
    t.match(await ids(), /ovn-installed="?true/, 'ovn-installed is set')
    t.equal(await lab.boundChassis(h3), lab.dpuId, 'bound here')
  })
})

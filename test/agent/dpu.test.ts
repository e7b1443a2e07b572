import { join } from 'node:path'
import type { Job } from 'bullmq'
import t from 'tap'
import { AGENT_VERSION, startAgentRuntime } from '../../agent/runtime.ts'
import { createApp } from '../../api/http/app.ts'
import { startController } from '../../infra/controller.ts'
import { run } from '../../infra/lab/dpu.ts'
import type { AgentStatus } from '../../lib/agent-protocol/grpc.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type IsolateAck,
  pickProtocolVersion,
  relayPortName,
} from '../../lib/agent-protocol/index.ts'
import { sharedCentralProvider } from '../../lib/ovn/index.ts'
import { processesMentioning } from '../helpers/processes.ts'
import { until } from '../pipeline/fixtures.ts'
import { startAgentLab } from './fixture.ts'

const FORWARDING = [
  'net.ipv4.conf.all.forwarding',
  'net.ipv4.conf.default.forwarding',
  'net.ipv6.conf.all.forwarding',
  'net.ipv6.conf.default.forwarding',
]

const RELAY_GUARDS = [
  'net.ipv4.conf.all.arp_ignore',
  'net.ipv4.conf.all.arp_announce',
  'net.ipv6.conf.all.disable_ipv6',
]

t.test('configure binds the host on this chassis; isolate unbinds it', async (t) => {
  const lab = await startAgentLab(t)
  const runtime = await startAgentRuntime(lab.config(), (line) => console.error(line))
  lab.later(() => runtime.stop())
  const grpc = await lab.agentClient(runtime.grpcAddress)
  lab.later(async () => grpc.close())

  // The controller picks the protocol from the agent's heartbeat.
  const beat = await lab.heartbeat()
  t.same(beat?.protocolVersions, ['1.0', '2.0'])
  // …and learns which OVN release its ovn-controller is (a newer northd refuses older).
  const installed = (await run('ovn-controller', ['--version'])).split('\n')[0] ?? ''
  t.equal(
    `ovn-controller ${beat?.ovnVersion}`,
    installed,
    "it reports its ovn-controller's version",
  )
  const version = pickProtocolVersion(beat?.protocolVersions ?? [])
  t.equal(version, '2.0')
  // A DPU that forwards hands that on to a namespace made in it: here the relay's
  // namespace is made first, forwarding, as such a DPU would make it.
  const relayPort = relayPortName(lab.input.group.name)
  const relayNs = `${lab.dpu.netns}-${relayPort}`
  const forwarding = () =>
    run('ip', ['netns', 'exec', relayNs, 'sysctl', '-n', ...FORWARDING]).then((out) =>
      out.trim().split(/\s+/),
    )
  await run('ip', ['netns', 'add', relayNs])
  lab.later(() =>
    run('ip', ['netns', 'del', relayNs]).then(
      () => undefined,
      () => undefined,
    ),
  )
  await run('ip', [
    'netns',
    'exec',
    relayNs,
    'sysctl',
    '-q',
    '-w',
    ...FORWARDING.map((k) => `${k}=1`),
  ])
  t.same(await forwarding(), ['1', '1', '1', '1'], 'the namespace forwarded before configure')
  const configure = buildConfigurePayload(version, {
    ...lab.input,
    host: { ...lab.input.host, mtu: 1400 },
  })
  const job = (await lab.queue.add('configure', configure, {
    jobId: agentJobId('configure', configure),
  })) as Job<unknown, ConfigureAck>
  const ack = (await job.waitUntilFinished(lab.events, 40_000)) as ConfigureAck

  t.equal(ack.hostPort, lab.host.hostPort)
  t.equal(ack.relayPort, relayPort)
  t.equal(ack.ovnInstalled, true)
  t.equal(ack.chassis, lab.dpuId)

  // What an operator sees: the SB binds the host's logical port to this DPU's chassis…
  t.equal(
    await lab.boundChassis(lab.input.host.logicalPort),
    lab.dpuId,
    'SB Port_Binding on this chassis',
  )
  // …and OVS marks the host port installed, on br-int, with the MTU v2 asked for.
  const ids = await lab.dpu.vsctl('get', 'Interface', lab.host.hostPort, 'external_ids')
  t.match(ids, /ovn-installed="?true/)
  t.match(ids, new RegExp(`iface-id="?${lab.input.host.logicalPort}`))
  t.equal((await lab.dpu.vsctl('port-to-br', lab.host.hostPort)).trim(), 'br-int')
  t.equal(
    (await lab.dpu.vsctl('get', 'Interface', lab.host.hostPort, 'mtu_request')).trim(),
    '1400',
  )
  const ovs = await lab.dpu.vsctl('get', 'Open_vSwitch', '.', 'external_ids')
  t.match(ovs, new RegExp(`ovn-remote="${lab.sbRemote}"`))
  t.match(ovs, /ovn-encap-type=geneve/)
  // The group's whole SB from the start: no port is marked installed before its
  // datapaths' flows have arrived (conditional monitoring's race).
  t.match(ovs, /ovn-monitor-all="?true/)
  t.match(ovs, new RegExp(`ovn-encap-ip="${lab.dpu.encapIp}"`))
  t.match(ovs, /system-id=/)
  t.equal((await lab.dpu.vsctl('get', 'Bridge', 'br-int', 'datapath_type')).trim(), 'netdev')

  // The group's relay: alone in its own namespace, on a veth named for the group (the
  // circuit id) whose other end is bound to the relay LSP, with the relay's tenant
  // address; an uplink veth in br-phy with a fabric address; one dhcrelay in there.
  t.same(
    await forwarding(),
    ['0', '0', '0', '0'],
    "the relay's namespace routes nothing between the fabric and the tenant's network",
  )
  const guarded = await run('ip', ['netns', 'exec', relayNs, 'sysctl', '-n', ...RELAY_GUARDS])
  t.same(guarded.trim().split(/\s+/), ['1', '2', '1'], 'answers ARP per side, has no IPv6')
  t.equal((await lab.dpu.vsctl('get', 'Interface', relayPort, 'type')).trim(), '""')
  t.equal((await lab.dpu.vsctl('port-to-br', `${relayPort}u`)).trim(), lab.dpu.uplinkBridge)
  t.equal(
    await lab.boundChassis(lab.input.group.relay?.logicalPort ?? ''),
    lab.dpuId,
    'relay port bound',
  )
  const inside = await run('ip', ['-n', relayNs, '-o', 'addr', 'show'])
  t.match(inside, new RegExp(`${relayPort}\\s+inet 10\\.10\\.10\\.254/24`), 'tenant address')
  t.match(inside, /uplink\s+inet \d+\.\d+\.\d+\.\d+\/24/, 'fabric address')
  const relayLink = await run('ip', ['-n', relayNs, 'link', 'show', relayPort])
  t.match(relayLink, /[<,]UP[,>]/, 'relay port is up')
  t.match(relayLink, /0a:00:00:00:01:fe/, 'with the LSP MAC')
  const links = (await run('ip', ['-n', relayNs, '-o', 'link', 'show']))
    .split('\n')
    .map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1])
    .filter((n) => n !== undefined)
    .sort()
  t.same(links, ['lo', relayPort, 'uplink'].sort(), 'nothing else for dhcrelay to hear')
  // This agent's own relay: its pid file under this lab's run directory (other test files'
  // agents may run a relay of a port named the same at the same time).
  // By this lab's own pid file: another agent test on the machine relays a group of the same
  // name, on a relay port of the same name.
  const relayPidFile = join(lab.config().runDir, `dhcrelay-${relayPort}.pid`)
  const relays = await processesMentioning(relayPidFile)
  t.equal(relays.filter((l) => /\bdhcrelay\b.*-a .*-id hzr/.test(l) && !/reaper/.test(l)).length, 1)
  t.match(relays.join('\n'), new RegExp(`-id ${relayPort} .*-U uplink ${lab.fabric.gatewayIp}`))

  // gRPC status says what ovs-vsctl shows.
  const status = await new Promise<AgentStatus>((resolve, reject) =>
    grpc.getStatus({}, (err, s) => (err || !s ? reject(err) : resolve(s))),
  )
  const bridges = (await lab.dpu.vsctl('list-br')).trim().split('\n').sort()
  t.same(status.bridges, bridges)
  t.same(
    status.boundPorts.map((p) => [p.port, p.logicalPort, p.ovnInstalled]),
    [[lab.host.hostPort, lab.input.host.logicalPort, true]],
  )
  const intPorts = (await lab.dpu.vsctl('list-ports', 'br-int')).trim().split('\n').sort()
  t.same(intPorts, [lab.host.hostPort, relayPort].sort())
  t.equal(status.ovnControllerRunning, true)
  t.equal(status.ovnControllerConnected, true)
  t.equal(status.ovnRemote, lab.sbRemote)
  t.same(
    status.relays.map((r) => [r.port, r.running]),
    [[relayPort, true]],
  )
  const init = await new Promise<{ dpuId: string; protocolVersions: string[] }>((resolve, reject) =>
    grpc.init({}, (err, r) => (err || !r ? reject(err) : resolve(r))),
  )
  t.equal(init.dpuId, lab.dpuId)
  t.same(init.protocolVersions, ['1.0', '2.0'])

  // The same job again (a duplicate delivery) changes nothing.
  const again = buildConfigurePayload('1.0', { ...lab.input, specVersion: 2 })
  const ack2 = (await (
    await lab.queue.add('configure', again, {
      jobId: agentJobId('configure', again),
    })
  ).waitUntilFinished(lab.events, 40_000)) as ConfigureAck
  t.equal(ack2.hostPort, lab.host.hostPort)
  t.same((await lab.dpu.vsctl('list-ports', 'br-int')).trim().split('\n').sort(), intPorts)

  // The group stops relaying DHCP: the next configure takes its relay away.
  const { dhcpServer: _server, relay: _relay, ...noRelay } = lab.input.group
  const plain = buildConfigurePayload('1.0', { ...lab.input, group: noRelay, specVersion: 3 })
  const ack3 = (await (
    await lab.queue.add('configure', plain, { jobId: agentJobId('configure', plain) })
  ).waitUntilFinished(lab.events, 40_000)) as ConfigureAck
  t.equal(ack3.relayPort, undefined, 'no relay in the ack')
  t.same(await processesMentioning(relayPidFile), [], 'dhcrelay stopped')
  t.same(
    (await lab.dpu.vsctl('list-ports', 'br-int')).trim().split('\n'),
    [lab.host.hostPort],
    'the relay port left br-int',
  )
  t.notMatch(await run('ip', ['netns', 'list']), relayNs, 'the relay namespace is gone')
  // …and it comes back with the group's dhcpServer.
  const relayed = buildConfigurePayload('1.0', { ...lab.input, specVersion: 4 })
  await (
    await lab.queue.add('configure', relayed, { jobId: agentJobId('configure', relayed) })
  ).waitUntilFinished(lab.events, 40_000)
  t.equal((await processesMentioning(relayPidFile)).length > 0, true)

  // isolate: the host port leaves br-int, the SB binding is released, the relay stops.
  const isolate = buildIsolatePayload('1.0', {
    dpuId: lab.dpuId,
    specVersion: 5,
    group: { name: lab.input.group.name },
    host: { name: 'h1', logicalPort: lab.input.host.logicalPort, hostPort: lab.host.hostPort },
  })
  const iso = (await (
    await lab.queue.add('isolate', isolate, {
      jobId: agentJobId('isolate', isolate),
    })
  ).waitUntilFinished(lab.events, 40_000)) as IsolateAck
  t.equal(iso.unbound, true)
  t.equal(iso.relayStopped, relayPort)
  t.equal(await lab.boundChassis(lab.input.host.logicalPort), '', 'SB Port_Binding unbound')
  t.equal((await lab.dpu.vsctl('list-ports', 'br-int')).trim(), '')
  t.same(await processesMentioning(relayPidFile), [])
  t.notMatch(await run('ip', ['netns', 'list']), relayNs, 'the relay namespace is gone')
  t.notMatch(await lab.dpu.vsctl('list-ports', lab.dpu.uplinkBridge), `${relayPort}u`)
})

t.test('a job in an unknown major version fails at once, without retries', async (t) => {
  const lab = await startAgentLab(t)
  const runtime = await startAgentRuntime(lab.config({ protocolVersions: ['1.0'] }))
  lab.later(() => runtime.stop())
  const payload = { ...buildConfigurePayload('2.0', lab.input), protocolVersion: '3.0' }
  const job = await lab.queue.add('configure', payload, { attempts: 5, jobId: 'future-job' })
  await t.rejects(job.waitUntilFinished(lab.events, 20_000), /AGENT_PROTOCOL_UNSUPPORTED.*3\.0/)
  const failed = await lab.queue.getJob('future-job')
  t.equal(failed?.attemptsMade, 1, 'not retried')
})

t.test('GET /v1/dpus lists the DPU whose agent heartbeats, and keeps it once silent', async (t) => {
  const lab = await startAgentLab(t)
  const ovn = lab.stack.ovn
  if (!ovn) throw new Error('lab without OVN')
  const controller = await startController({
    redisUrl: lab.redisUrl,
    ovn: sharedCentralProvider({ nb: ovn.nb.unix, sb: lab.sbRemote, sbController: ovn.sb.unix }),
    fabric: { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' },
    reconcileEveryMs: 0,
    prefix: `${lab.queuePrefix}-controller`,
  })
  lab.later(() => controller.close())
  const operator = 'operator-token-0123456789abcdef'
  const app = createApp({
    readiness: {},
    v1: { client: controller.client, tokens: { operator: [operator], tenants: {} } },
  })
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
  const dpus = async (): Promise<any[]> => {
    const res = await app.request('/v1/dpus', { headers: { authorization: `Bearer ${operator}` } })
    return ((await res.json()) as { items: unknown[] }).items
  }
  t.same(await dpus(), [], 'no agent, no DPU')

  const runtime = await startAgentRuntime(lab.config({ protocolVersions: ['1.0'] }))
  lab.later(() => runtime.stop())
  const listed = await dpus()
  t.match(
    listed,
    [
      {
        id: lab.dpuId,
        state: 'Online',
        hosts: [],
        agent: {
          version: AGENT_VERSION,
          protocolVersions: ['1.0'],
          heartbeatIntervalMs: 1000,
          observed: { chassis: lab.dpuId },
        },
      },
    ],
    'the DPU as its agent reports it, before the operator added it to the inventory',
  )
  t.notOk(listed[0]?.spec, 'with no inventory entry yet')
  t.equal(listed.length, 1, 'and only it')
  const first = listed[0]?.agent?.lastHeartbeat
  const later = await until(
    async () => (await dpus())[0]?.agent?.lastHeartbeat,
    (at) => at !== undefined && at !== first,
    5_000,
  )
  t.ok(Date.parse(later) > Date.parse(first), 'the agent keeps beating')

  await runtime.stop()
  const last = (await dpus())[0]?.lastHeartbeat
  t.ok(await lab.heartbeat().then((b) => b === undefined), 'its heartbeat key is gone')
  const silent = await until(
    async () => (await dpus())[0],
    (d) => d?.state === 'Lost',
    10_000,
  )
  t.match(
    silent,
    { id: lab.dpuId, state: 'Lost', lastHeartbeat: last, agent: { version: AGENT_VERSION } },
    'a stopped agent stays listed, Lost, with its last heartbeat and report',
  )
  t.ok(
    Date.now() - Date.parse(last) >= 2 * 1000,
    'Lost two intervals after its last beat, not before',
  )
  const one = await app.request(`/v1/dpus/${lab.dpuId}`, {
    headers: { authorization: `Bearer ${operator}` },
  })
  t.match(
    await one.json(),
    { id: lab.dpuId, state: 'Lost', lastHeartbeat: last },
    'GET /v1/dpus/{id} too',
  )
})

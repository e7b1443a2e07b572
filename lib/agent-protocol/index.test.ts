import t from 'tap'
import * as v from 'valibot'
import { hashTagOf } from '../redis/slots.ts'
import {
  AGENT_SHARDS,
  agentJobId,
  agentQueueName,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureInput,
  ConfigurePayloadV1,
  Heartbeat,
  InvalidAgentPayload,
  IsolatePayloadV1,
  isAgentQueueName,
  parseAgentJob,
  pickProtocolVersion,
  relayPortName,
  UnsupportedProtocolVersion,
} from './index.ts'

const input: ConfigureInput = {
  dpuId: 'dpu-1',
  specVersion: 3,
  group: {
    name: 'tenant-a-net',
    sbRemote: 'tcp:10.0.0.1:6642',
    dhcpServer: '10.0.0.53',
    relay: { logicalPort: 'tenant-a-net-relay', mac: '0a:00:00:00:00:fe' },
  },
  host: { name: 'host-a', logicalPort: 'tenant-a-net-host-a', mac: '0a:00:00:00:00:01', mtu: 9000 },
}

t.test('the controller picks the highest version the agent advertises', async (t) => {
  const cases: [string[], string][] = [
    [['1.0'], '1.0'],
    [['1.0', '2.0'], '2.0'],
    [['1.3'], '1.0'],
    [['2.1', '3.0'], '2.0'],
  ]
  for (const [agent, expected] of cases) {
    t.equal(pickProtocolVersion(agent), expected, `agent ${agent.join(',')}`)
  }
  t.throws(() => pickProtocolVersion(['3.0']), UnsupportedProtocolVersion)
  t.throws(() => pickProtocolVersion([]), UnsupportedProtocolVersion)
})

t.test(
  'a v1 payload drops what only v2 knows; both parse for an agent that knows them',
  async (t) => {
    const v1 = buildConfigurePayload('1.0', input)
    t.equal(v1.protocolVersion, '1.0')
    t.notOk('mtu' in v1.host, 'v1 has no host.mtu')
    const v2 = buildConfigurePayload('2.0', input)
    t.equal(v2.host.mtu, 9000)

    const newAgent = parseAgentJob('configure', v2)
    t.equal(newAgent.name, 'configure')
    t.equal(newAgent.name === 'configure' && newAgent.payload.host.mtu, 9000)
    const oldAgentGetsV1 = parseAgentJob('configure', v1, ['1.0'])
    t.equal(
      oldAgentGetsV1.name === 'configure' && oldAgentGetsV1.payload.host.logicalPort,
      'tenant-a-net-host-a',
    )
  },
)

t.test('an agent refuses an unknown major and invalid payloads', async (t) => {
  const v2 = buildConfigurePayload('2.0', input)
  t.throws(() => parseAgentJob('configure', v2, ['1.0']), {
    code: 'AGENT_PROTOCOL_UNSUPPORTED',
    message: /protocol version 2\.0 is not supported \(supported: 1\.0\)/,
  })
  t.throws(() => parseAgentJob('configure', { dpuId: 'x' }), UnsupportedProtocolVersion)
  const sbCertificate = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'
  const withCertificate = { ...v2, group: { ...v2.group, sbCertificate } }
  t.match(
    parseAgentJob('configure', withCertificate).payload,
    { group: { sbCertificate } },
    "the group SB's certificate for this DPU is carried",
  )
  // A newer minor of a known major parses: minors only add optional fields.
  t.equal(parseAgentJob('configure', { ...v2, protocolVersion: '2.7' }).name, 'configure')

  const bad: [string, unknown, RegExp][] = [
    ['configure', { ...v2, dpuId: 'a:b' }, /dpuId/],
    ['configure', { ...v2, host: { ...v2.host, mac: 'nope' } }, /host\.mac/],
    ['configure', { ...v2, group: { ...v2.group, sbRemote: 'x' } }, /group\.sbRemote/],
    [
      'configure',
      { ...v2, group: { ...v2.group, sbCertificate: '-----BEGIN PRIVATE KEY-----\nAAAA\n' } },
      /group\.sbCertificate.*one PEM certificate/,
    ],
    ['configure', { ...v2, host: { ...v2.host, hostPort: 'much-too-long-ifname' } }, /hostPort/],
    ['isolate', { protocolVersion: '1.0', dpuId: 'd', specVersion: 1 }, /group/],
    ['explode', v2, /unknown job name/],
  ]
  for (const [job, data, message] of bad) {
    t.throws(() => parseAgentJob(job, data), InvalidAgentPayload)
    t.throws(() => parseAgentJob(job, data), { message }, `${job}: ${message}`)
  }
})

t.test('names: queue, job id, relay port', async (t) => {
  t.equal(agentQueueName('dpu-1'), '{hz-agents-6}agent-dpu-1', 'its shard tag first')
  const shards = new Set(
    Array.from({ length: 200 }, (_, i) => hashTagOf(agentQueueName(`dpu-${i}`))),
  )
  t.equal(shards.size, AGENT_SHARDS, '200 DPUs use every shard')
  t.ok(isAgentQueueName(agentQueueName('dpu-1')), "a DPU's queue is an agent queue")
  for (const other of ['hydrazine', 'frr', 'agent-dpu-1', '{hz-agents-x}agent-dpu-1']) {
    t.notOk(isAgentQueueName(other), `${other} is not`)
  }
  t.equal(
    agentJobId('configure', buildConfigurePayload('1.0', input)),
    'agent-configure-dpu-1-host-a-v3',
  )
  const isolate = buildIsolatePayload('1.0', {
    dpuId: 'dpu-1',
    specVersion: 4,
    group: { name: 'g' },
    host: { name: 'host a', logicalPort: 'lp' },
  })
  t.equal(agentJobId('isolate', isolate), 'agent-isolate-dpu-1-host_a-v4')
  const relay = relayPortName('tenant-a-net')
  t.match(relay, /^hzr[0-9a-f]{8}$/)
  t.ok(relay.length <= 15)
  t.equal(relayPortName('tenant-a-net'), relay, 'deterministic')
  t.not(relayPortName('tenant-b-net'), relay, 'one per group')
})

t.test(
  'relay.portName: optional, validated, and harmless to an agent that predates it',
  async (t) => {
    const relay = { logicalPort: 'tenant-a-net-relay', mac: '0a:00:00:00:00:fe' }
    const withName = {
      ...input,
      group: { ...input.group, relay: { ...relay, portName: 'hzr0000002a' } },
    }
    for (const version of ['1.0', '2.0'] as const) {
      const payload = buildConfigurePayload(version, withName)
      t.equal(payload.group.relay?.portName, 'hzr0000002a', `${version} carries it`)
      const parsed = parseAgentJob('configure', payload, [version])
      t.equal(parsed.name === 'configure' && parsed.payload.group.relay?.portName, 'hzr0000002a')
    }
    // Without it (an older controller) the payload is as before.
    t.notOk('portName' in (buildConfigurePayload('2.0', input).group.relay ?? {}))

    // An agent built before portName existed: the v1 schema without the field. It accepts
    // a new payload and drops the field (it names the port by hash).
    const v1 = ConfigurePayloadV1.entries
    const oldRelay = v.object(
      Object.fromEntries(
        Object.entries(v1.group.entries.relay.wrapped.entries).filter(([k]) => k !== 'portName'),
      ),
    )
    const OlderV1 = v.object({
      ...v1,
      group: v.object({ ...v1.group.entries, relay: v.optional(oldRelay) }),
    })
    const old = v.parse(OlderV1, buildConfigurePayload('1.0', withName))
    t.same(old.group.relay, relay, 'an older agent drops portName')

    const bad = ['eth0', 'hzr123', 'hzr0000002A', 'hzr0000002a0', 'p0', '']
    for (const portName of bad) {
      const payload = {
        ...buildConfigurePayload('2.0', input),
        group: { ...withName.group, relay: { ...relay, portName } },
      }
      t.throws(
        () => parseAgentJob('configure', payload),
        {
          code: 'AGENT_PAYLOAD_INVALID',
          message: /group\.relay\.portName: must be 'hzr' and 8 lower-case hex digits/,
        },
        `refuses ${JSON.stringify(portName)}`,
      )
    }
  },
)

t.test('the heartbeat schema parses what an agent writes', async (t) => {
  const beat = {
    dpuId: 'dpu-1',
    agentVersion: '0.1.0',
    protocolVersions: ['1.0'],
    fabricIps: ['10.0.0.2'],
    at: new Date().toISOString(),
    intervalMs: 1000,
    observed: {
      chassis: 'dpu-1',
      bridges: ['br-int', 'br-phy'],
      ovnRemote: null,
      ovnController: { running: false, connected: false },
      boundPorts: [],
      relays: [],
    },
  }
  t.ok(v.is(Heartbeat, beat))
  t.notOk(v.is(Heartbeat, { ...beat, protocolVersions: ['one'] }))
})

t.test("an isolate may carry the group's SB credentials; an older agent drops them", async (t) => {
  const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'
  const isolate = {
    dpuId: 'dpu-1',
    specVersion: 4,
    host: { name: 'host-a', logicalPort: 'tenant-a-net-host-a' },
  }
  for (const version of ['1.0', '2.0'] as const) {
    const payload = buildIsolatePayload(version, {
      ...isolate,
      group: { name: 'tenant-a-net', sbCertificate: pem, sbCa: pem },
    })
    const parsed = parseAgentJob('isolate', payload, [version])
    t.same(
      parsed.name === 'isolate' && parsed.payload.group,
      { name: 'tenant-a-net', sbCertificate: pem, sbCa: pem },
      `${version} carries them`,
    )
  }
  t.same(
    buildIsolatePayload('2.0', { ...isolate, group: { name: 'tenant-a-net' } }).group,
    { name: 'tenant-a-net' },
    'without them (an SB that takes the identity), the payload is as before',
  )
  // An agent built before the fields: its isolate group held only the name.
  const OlderIsolate = v.object({
    ...IsolatePayloadV1.entries,
    group: v.object({ name: v.string() }),
  })
  const old = v.parse(
    OlderIsolate,
    buildIsolatePayload('1.0', { ...isolate, group: { name: 'tenant-a-net', sbCertificate: pem } }),
  )
  t.same(old.group, { name: 'tenant-a-net' }, 'an older agent drops them')
  t.throws(
    () =>
      parseAgentJob('isolate', {
        ...isolate,
        protocolVersion: '2.0',
        group: { name: 'tenant-a-net', sbCertificate: 'not a certificate' },
      }),
    { code: 'AGENT_PAYLOAD_INVALID', message: /group\.sbCertificate.*one PEM certificate/ },
    'a payload whose certificate is no PEM certificate is refused',
  )
})

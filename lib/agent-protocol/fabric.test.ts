import t from 'tap'
import {
  buildFabricConfigurePayload,
  type FabricConfigureInput,
  InvalidAgentPayload,
  parseAgentJob,
  pickProtocolVersion,
  speaksFabric,
  speaksFabricAccess,
  UnsupportedProtocolVersion,
} from './index.ts'

const input: FabricConfigureInput = {
  dpuId: 'dpu-1',
  specVersion: 2,
  group: {
    name: 'tenant-a-fab',
    vni: 10001,
    vlan: 101,
    asn: 65001,
    routeTarget: '65001:10001',
    gateways: [{ address: '10.10.0.1', prefixLength: 24 }],
  },
  host: { name: 'host-a', mac: '0a:00:00:00:00:01', hostPort: 'pf0hpf', addresses: ['10.10.0.5'] },
}

t.test('a Fabric configure is protocol 3.1 and parses as a Fabric job', async (t) => {
  const payload = buildFabricConfigurePayload(input)
  t.equal(payload.protocolVersion, '3.1')
  const job = parseAgentJob('configure', payload)
  t.equal(job.name, 'fabric-configure')
  t.match(job.payload, { group: { vni: 10001, routeTarget: '65001:10001' } })
})

t.test(
  'an agent that speaks no 3.x refuses it; the controller never picks 3.x for Overlay',
  async (t) => {
    const payload = buildFabricConfigurePayload(input)
    t.throws(() => parseAgentJob('configure', payload, ['1.0', '2.0']), UnsupportedProtocolVersion)
    t.equal(pickProtocolVersion(['1.0', '2.0', '3.0']), '2.0')
    t.ok(speaksFabric(['2.0', '3.0']))
    t.notOk(speaksFabric(['1.0', '2.0']))
    t.ok(speaksFabricAccess(['2.0', '3.0', '3.1']), '3.1 builds access levels')
    t.notOk(speaksFabricAccess(['2.0', '3.0']), '3.0 does not')
    // A 3.0 agent reads a 3.1 job (minors only add optional fields).
    t.equal(parseAgentJob('configure', payload, ['3.0']).name, 'fabric-configure')
  },
)

t.test('invalid Fabric payloads are refused naming the field', async (t) => {
  const payload = buildFabricConfigurePayload(input)
  const cases: [string, unknown, RegExp][] = [
    [
      'route target not ASN:VNI',
      { ...payload, group: { ...payload.group, routeTarget: '65001:9' } },
      /routeTarget must be ASN:VNI/,
    ],
    ['VNI out of range', { ...payload, group: { ...payload.group, vni: 0 } }, /group\.vni/],
    [
      'no host address',
      { ...payload, host: { ...payload.host, addresses: [] } },
      /host\.addresses: must hold the host address/,
    ],
    [
      'two IPv4 addresses',
      { ...payload, host: { ...payload.host, addresses: ['10.10.0.5', '10.10.0.6'] } },
      /at most one address per family/,
    ],
    [
      'a gateway that is no address',
      { ...payload, group: { ...payload.group, gateways: [{ address: 'x', prefixLength: 24 }] } },
      /group\.gateways\.0\.address/,
    ],
    [
      'a host port that is no interface name',
      { ...payload, host: { ...payload.host, hostPort: 'a/b' } },
      /host\.hostPort/,
    ],
    [
      'an access level that is none of the three',
      { ...payload, host: { ...payload.host, access: 'Everything' } },
      /host\.access/,
    ],
    [
      'a public IP for a FabricAccess host',
      { ...payload, host: { ...payload.host, access: 'FabricAccess', publicIp: '203.0.113.9' } },
      /host\.publicIp: a PublicAccess host, and only one, has a public IP/,
    ],
    [
      'a PublicAccess host without its public IP',
      { ...payload, host: { ...payload.host, access: 'PublicAccess' } },
      /host\.publicIp/,
    ],
    [
      'a public IP that is no IPv4 address',
      { ...payload, host: { ...payload.host, access: 'PublicAccess', publicIp: '2001:db8::1' } },
      /host\.publicIp: must be an IPv4 address/,
    ],
    [
      "a public IP withdrawn that is the host's own address",
      { ...payload, host: { ...payload.host, withdrawPublicIp: payload.host.addresses[0] } },
      /host\.withdrawPublicIp: a public IP withdrawn is neither/,
    ],
    [
      'a public IP withdrawn that it keeps',
      {
        ...payload,
        host: {
          ...payload.host,
          access: 'PublicAccess',
          publicIp: '203.0.113.9',
          withdrawPublicIp: '203.0.113.9',
        },
      },
      /host\.withdrawPublicIp/,
    ],
  ]
  for (const [what, data, message] of cases) {
    t.throws(() => parseAgentJob('configure', data), InvalidAgentPayload, what)
    t.throws(() => parseAgentJob('configure', data), { message }, what)
  }
  t.throws(
    () => parseAgentJob('isolate', { ...payload, group: { name: 'g' } }),
    { message: /group\.vni/ },
    'an isolate names the VRF by its VNI',
  )
})

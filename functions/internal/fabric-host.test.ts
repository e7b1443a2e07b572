import t from 'tap'
import { buildFabricConfigurePayload } from '../../lib/agent-protocol/index.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import { fabricConfigureRequestOf, gatewaysOf, hostPrefixOf } from './fabric-host.ts'

const group = storedGroup('fab-a', {
  networkImplementationType: 'Fabric',
  network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
  dhcpServer: '172.18.0.53',
})

t.test("a Fabric host's configure carries the group's VRF and the host's addresses", async (t) => {
  const host = storedHost('h1', { resourceGroup: 'fab-a', identifier: 'pf0vf0' })
  const request = fabricConfigureRequestOf(host, group, { vni: 10007, vlan: 107 }, 65001, [
    '10.10.10.5',
    'fd00:10::5',
  ])
  t.match(request, {
    dpuId: 'dpu-1',
    specVersion: 1,
    group: {
      name: 'fab-a',
      vni: 10007,
      vlan: 107,
      asn: 65001,
      routeTarget: '65001:10007',
      gateways: [
        { address: '10.10.10.1', prefixLength: 24 },
        { address: 'fd00:10::1', prefixLength: 64 },
      ],
      dhcpServer: '172.18.0.53',
    },
    host: { name: 'h1', mac: '52:54:00:00:00:01', addresses: ['10.10.10.5', 'fd00:10::5'] },
  })
  t.equal(buildFabricConfigurePayload(request).protocolVersion, '3.1', 'and it validates')
  t.equal(request.host.access, 'None', 'a None host: its traffic stays in its group')
})

t.test('a leaking host says its access level; a PublicAccess host its public IP', async (t) => {
  const cases = [
    { access: 'None', publicIp: undefined, wanted: undefined },
    { access: 'FabricAccess', publicIp: '203.0.113.9', wanted: undefined },
    { access: 'PublicAccess', publicIp: '203.0.113.9', wanted: '203.0.113.9' },
  ] as const
  for (const c of cases) {
    const host = storedHost('h1', { resourceGroup: 'fab-a', hostAccess: c.access })
    const request = fabricConfigureRequestOf(
      host,
      group,
      { vni: 10007, vlan: 107 },
      65001,
      ['10.10.10.5'],
      c.publicIp,
    )
    t.equal(request.host.access, c.access, `${c.access}: sent as it is`)
    t.equal(request.host.publicIp, c.wanted, `${c.access}: public IP ${c.wanted ?? 'none'}`)
    t.ok(buildFabricConfigurePayload(request), `${c.access}: validates`)
  }
})

t.test('gateways and host prefixes per family', async (t) => {
  t.same(gatewaysOf(storedGroup('g')), [{ address: '10.10.10.1', prefixLength: 24 }])
  t.equal(hostPrefixOf('10.0.0.5'), '10.0.0.5/32')
  t.equal(hostPrefixOf('fd00::5'), 'fd00::5/128')
})

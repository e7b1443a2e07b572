import t from 'tap'
import { fabricRelayMac, fabricRelaySpecOf, RELAY_VNI_KEY } from './fabric-relay.ts'
import { Key, type OwnedPort } from './ovs.ts'

t.test("a Fabric group's relay MAC comes from its VNI, locally administered", async (t) => {
  t.equal(fabricRelayMac(10000), '02:68:7a:00:27:10')
  t.equal(fabricRelayMac(16_777_215), '02:68:7a:ff:ff:ff')
  t.not(fabricRelayMac(7), fabricRelayMac(8), 'one per group')
})

t.test('a restarted agent reads a Fabric relay back from its uplink port', async (t) => {
  const uplink = (ids: Record<string, string>, name = 'vlan100u'): OwnedPort => ({
    name,
    bridge: 'br-phy',
    role: 'dhcp-relay-uplink',
    group: 'fab-a',
    logicalPort: '',
    ovnInstalled: false,
    ofport: 3,
    externalIds: ids,
  })
  const ids = {
    [Key.dhcpServer]: '172.18.0.1',
    [Key.relayMac]: '02:68:7a:00:27:10',
    [Key.relayAddress]: '10.30.0.1/32',
    [Key.relayUplink]: '172.18.0.90/24',
    [RELAY_VNI_KEY]: '10000',
  }
  t.same(
    fabricRelaySpecOf(uplink(ids), (vni) => `lab-dpu1-v${vni}`),
    {
      group: 'fab-a',
      port: 'vlan100',
      dhcpServer: '172.18.0.1',
      mac: '02:68:7a:00:27:10',
      address: '10.30.0.1/32',
      uplinkAddress: '172.18.0.90/24',
      downstream: { name: 'hzd10000', netns: 'lab-dpu1-v10000' },
    },
    'its downstream link in the VRF, its circuit id vlan100',
  )
  const { [RELAY_VNI_KEY]: _vni, ...overlay } = ids
  t.equal(
    fabricRelaySpecOf(uplink(overlay), () => undefined),
    undefined,
    "an Overlay relay's uplink",
  )
  t.equal(
    fabricRelaySpecOf(uplink(ids, 'hzr0a0b0c0du'), () => undefined),
    undefined,
    'not vlan<N>',
  )
})

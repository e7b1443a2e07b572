import t from 'tap'
import { loadConfig } from './index.ts'

const NETWORK = { cidr: '10.99.0.0/24', gateway: '10.99.0.1' }

t.test('HYDRAZINE_ADMIN_NETWORK: the group Hydrazine owns as the admin network', async (t) => {
  t.equal(loadConfig({}).adminNetwork, undefined, 'unset: no admin network')
  const value = JSON.stringify({ group: 'admin', network: NETWORK, dhcpServer: '172.18.0.50' })
  t.same(
    loadConfig({ HYDRAZINE_ADMIN_NETWORK: value, HYDRAZINE_DHCP_SERVERS: '172.18.0.50' })
      .adminNetwork,
    { group: 'admin', network: NETWORK, dhcpServer: '172.18.0.50' },
    'its group, network and provisioning server',
  )
  t.same(
    loadConfig({ HYDRAZINE_ADMIN_NETWORK: JSON.stringify({ group: 'admin', network: NETWORK }) })
      .adminNetwork,
    { group: 'admin', network: NETWORK },
    'no DHCP relay',
  )

  const bad: [string, unknown, RegExp][] = [
    ['not JSON', '{group: admin}', /HYDRAZINE_ADMIN_NETWORK: is not valid JSON/],
    ['not an object', [1], /HYDRAZINE_ADMIN_NETWORK: must be a JSON object/],
    [
      'a field too many',
      { group: 'admin', network: NETWORK, tenantId: 't' },
      /tenantId: is not a field/,
    ],
    ['no group', { network: NETWORK }, /HYDRAZINE_ADMIN_NETWORK: group: is required/],
    [
      'a group that is no label',
      { group: 'Admin Net', network: NETWORK },
      /group: must be an RFC 1123 label/,
    ],
    [
      'a gateway outside',
      { group: 'admin', network: { cidr: '10.99.0.0/24', gateway: '10.98.0.1' } },
      /network\.gateway: gateway must lie inside the network/,
    ],
    [
      'a DHCP server the operator does not relay to',
      { group: 'admin', network: NETWORK, dhcpServer: '172.18.0.51' },
      /HYDRAZINE_ADMIN_NETWORK: dhcpServer: 172\.18\.0\.51 must be one of HYDRAZINE_DHCP_SERVERS \(none set\)/,
    ],
  ]
  for (const [name, data, message] of bad) {
    const text = typeof data === 'string' ? data : JSON.stringify(data)
    t.throws(() => loadConfig({ HYDRAZINE_ADMIN_NETWORK: text }), { message }, name)
  }
})

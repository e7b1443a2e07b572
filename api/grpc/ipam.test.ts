/**
 * A group's address map through the wire as GetResourceGroupIpam sends it: the same
 * fields as the HTTP JSON, the map format an enum, an IPv6 subnet's size a decimal
 * string beyond 2^53, and an absent name or gateway still absent on the other side.
 */
import t from 'tap'
import { parseIp } from '../../lib/ipam/address.ts'
import { compile, normalizeNetwork, type SubnetSpec } from '../../lib/ipam/definition.ts'
import { describeUsage, type Held } from '../../lib/ipam/usage.ts'
import { ipamMessage } from './ipam.ts'
import { hydrazineServiceDefinition } from './protocol.ts'

const held = (owner: string, ip: string): Held => ({ owner, address: parseIp(ip) })

/** The usage as a client receives it: encoded by the server, decoded by the client. */
function overTheWire(subnets: SubnetSpec[], holders: Held[]) {
  const usage = describeUsage('g', compile('g', normalizeNetwork({ subnets })), holders)
  const method = hydrazineServiceDefinition().GetResourceGroupIpam
  return method.responseDeserialize(method.responseSerialize(ipamMessage(usage)))
}

t.test('an IPv4 /28 with a named pool and a reservation', async (t) => {
  const answer = overTheWire(
    [
      {
        cidr: '10.0.0.0/28',
        gateway: '10.0.0.1',
        pools: [
          { start: '10.0.0.1', end: '10.0.0.9', name: 'default' },
          { start: '10.0.0.10', end: '10.0.0.13', name: 'vms' },
        ],
        external: [{ start: '10.0.0.3', end: '10.0.0.5' }],
      },
    ],
    [held('h2', '10.0.0.11'), held('h1', '10.0.0.3')],
  )
  t.match(answer, {
    network: 'g',
    subnets: [
      {
        cidr: '10.0.0.0/28',
        gateway: '10.0.0.1',
        dhcp: false,
        size: '16',
        used: 2,
        reserved: 5,
        free: 8,
        pools: [
          { name: 'default', start: '10.0.0.1', end: '10.0.0.9', size: 9, used: 1, free: 5 },
          { name: 'vms', start: '10.0.0.10', end: '10.0.0.13', size: 4, used: 1, free: 3 },
        ],
        external: [{ start: '10.0.0.3', end: '10.0.0.5' }],
        mapFormat: 'IPAM_MAP_FORMAT_ADDRESS',
        map: 'XX.+XX.....+..-X',
      },
    ],
    allocations: [
      { owner: 'h1', ip: '10.0.0.3' },
      { owner: 'h2', ip: '10.0.0.11' },
    ],
  })
  t.equal(answer.subnets[0]?.name, undefined, 'a subnet without a name has none')
})

t.test('an IPv6 /64: its size in decimal, its map as runs', async (t) => {
  const [subnet] = overTheWire(
    [
      {
        cidr: 'fd00:20::/64',
        pools: [{ start: 'fd00:20::', end: 'fd00:20::ffff', name: 'default' }],
      },
    ],
    [],
  ).subnets
  t.equal(subnet?.size, '18446744073709551616')
  t.equal(subnet?.mapFormat, 'IPAM_MAP_FORMAT_RUNS')
  t.equal(
    subnet?.map,
    `X1.65535-${(1n << 64n) - 0x10000n}`,
    'the network address, the pool, the rest',
  )
  t.equal(subnet?.free, 65535)
  t.equal(subnet?.gateway, undefined, 'an L2-only subnet has no gateway')
})

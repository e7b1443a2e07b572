import t from 'tap'
import {
  arpRequest,
  bindingAddresses,
  InvalidMicroflow,
  microflow,
  onLink,
  type PacketSpec,
} from './flow.ts'

const base: PacketSpec = {
  inport: 'hz/g/h1',
  ethSrc: '0A:00:00:00:00:01',
  ethDst: '0a:00:00:00:00:02',
  ipSrc: '10.0.0.2',
  ipDst: '10.0.0.3',
}
const head = 'inport == "hz/g/h1" && eth.src == 0a:00:00:00:00:01 && eth.dst == 0a:00:00:00:00:02'

t.test('microflows', async (t) => {
  const cases: [string, Partial<PacketSpec>, string][] = [
    [
      'ICMP echo by default',
      {},
      `${head} && ip4.src == 10.0.0.2 && ip4.dst == 10.0.0.3 && ip.ttl == 64 && icmp4 && icmp4.type == 8 && icmp4.code == 0`,
    ],
    [
      'a TCP SYN to the port',
      { proto: 'tcp', port: 443 },
      `${head} && ip4.src == 10.0.0.2 && ip4.dst == 10.0.0.3 && ip.ttl == 64 && tcp && tcp.src == 49152 && tcp.dst == 443 && tcp.flags == 2`,
    ],
    [
      'UDP to the port',
      { proto: 'udp', port: 53, ttl: 63 },
      `${head} && ip4.src == 10.0.0.2 && ip4.dst == 10.0.0.3 && ip.ttl == 63 && udp && udp.src == 49152 && udp.dst == 53`,
    ],
    [
      'IPv6 echo',
      { ipSrc: 'fd00::2', ipDst: 'fd00::3' },
      `${head} && ip6.src == fd00::2 && ip6.dst == fd00::3 && ip.ttl == 64 && icmp6 && icmp6.type == 128 && icmp6.code == 0`,
    ],
  ]
  for (const [name, change, expected] of cases) {
    t.equal(microflow({ ...base, ...change }), expected, name)
  }
})

t.test('what cannot be traced is refused, naming why', async (t) => {
  const cases: [Partial<PacketSpec>, RegExp][] = [
    [{ ipDst: 'fd00::3' }, /not of one address family/],
    [{ ipSrc: '10.0.0' }, /source "10.0.0" is not an IP address/],
    [{ ethDst: 'ff:ff' }, /destination MAC "ff:ff" is not a MAC/],
    [{ inport: 'a" || 1 == 1 || "' }, /not a logical port name/],
    [{ proto: 'tcp' }, /tcp needs a port/],
    [{ proto: 'udp', port: 70000 }, /udp needs a port/],
    [{ port: 80 }, /ICMP has no port/],
    [{ ttl: 0 }, /TTL 0/],
  ]
  for (const [change, message] of cases) {
    t.throws(() => microflow({ ...base, ...change }), { name: InvalidMicroflow.name, message })
  }
})

t.test('the ARP a host sends for an on-link address', async (t) => {
  t.equal(
    arpRequest({ inport: 'hz/g/h1', mac: '0a:00:00:00:00:01', ip: '10.0.0.2', target: '10.0.0.9' }),
    'inport == "hz/g/h1" && eth.src == 0a:00:00:00:00:01 && eth.dst == ff:ff:ff:ff:ff:ff && arp.op == 1 && arp.sha == 0a:00:00:00:00:01 && arp.spa == 10.0.0.2 && arp.tha == 00:00:00:00:00:00 && arp.tpa == 10.0.0.9',
  )
  t.throws(() =>
    arpRequest({ inport: 'p', mac: '0a:00:00:00:00:01', ip: 'fd00::2', target: 'fd00::9' }),
  )
})

t.test('on-link: both in the source subnet', async (t) => {
  const subnets = ['10.0.0.0/24', '10.0.1.0/24']
  const cases: [string, string, boolean][] = [
    ['10.0.0.2', '10.0.0.3', true],
    ['10.0.0.2', '10.0.1.3', false],
    ['10.0.0.2', '8.8.8.8', false],
    ['192.168.0.2', '192.168.0.3', false],
  ]
  for (const [a, b, expected] of cases) t.equal(onLink(a, b, subnets), expected, `${a} → ${b}`)
})

t.test('Port_Binding mac entries', async (t) => {
  const cases: [string, ReturnType<typeof bindingAddresses>][] = [
    ['0a:00:00:00:00:02 10.0.0.3', { mac: '0a:00:00:00:00:02', ips: ['10.0.0.3'] }],
    [
      '0A:D1:14:BF:48:49 10.10.10.1/24 fd00::1/64',
      { mac: '0a:d1:14:bf:48:49', ips: ['10.10.10.1', 'fd00::1'] },
    ],
    ['router', undefined],
    ['unknown', undefined],
  ]
  for (const [entry, expected] of cases) t.same(bindingAddresses(entry), expected, entry)
})

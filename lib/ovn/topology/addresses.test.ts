import t from 'tap'
import { inSubnet } from './addresses.ts'

t.test('inSubnet: an address inside a network of its own family', async (t) => {
  const cases: [ip: string, cidr: string, inside: boolean][] = [
    ['10.10.10.2', '10.10.10.0/24', true],
    ['10.10.11.2', '10.10.10.0/24', false],
    ['10.10.10.2', '0.0.0.0/0', true],
    ['10.10.10.2', '10.10.10.2/32', true],
    // A NAT's logical_ip may carry host bits: they are ignored.
    ['10.10.10.9', '10.10.10.1/24', true],
    ['fd00:10::800:ff:fe00:1', 'fd00:10::/64', true],
    ['FD00:10:0:0::5', 'fd00:10::/64', true],
    ['fd00:11::5', 'fd00:10::/64', false],
    ['::ffff:10.0.0.1', '::ffff:0:0/96', true],
    ['10.0.0.1', '::ffff:0:0/96', false],
    ['fd00:10::5', '10.0.0.0/8', false],
    ['not an address', '10.0.0.0/8', false],
    ['fe80::1%eth0', 'fe80::/64', false],
    ['10.0.0.1', '10.0.0.0', false],
    ['10.0.0.1', '10.0.0.0/33', false],
  ]
  for (const [ip, cidr, inside] of cases) {
    t.equal(inSubnet(ip, cidr), inside, `${ip} ${inside ? 'in' : 'not in'} ${cidr}`)
  }
})

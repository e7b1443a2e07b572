/**
 * A group's security policies on a real OVN central (NB + SB + northd), checked with
 * ovn-trace: a deny rule drops what it names between two hosts and nothing else, an
 * allow rule above it makes an exception, removing the rules restores the traffic, and
 * the port groups follow the group's hosts.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import {
  applyGroupTopology,
  type GroupPolicyRule,
  type GroupTopologySpec,
  OvsdbClient,
  policyNames,
  topologyNames,
} from '../../lib/ovn/index.ts'
import { withStack } from '../helpers/stack.ts'

const run = promisify(execFile)
const G = 'group-p'
const hosts = ['h1', 'h2', 'h3'] as const
const mac = (i: number) => `0a:00:00:00:00:0${i + 1}`
const ip = (i: number) => `10.20.0.${i + 2}`

function spec(policies: GroupPolicyRule[], members: readonly string[] = hosts): GroupTopologySpec {
  return {
    name: G,
    cidr: '10.20.0.0/24',
    gateway: '10.20.0.1',
    dummyFabricIp: '172.18.0.254/24',
    members: hosts.flatMap((h, i) =>
      members.includes(h)
        ? [
            {
              hostName: h,
              logicalPort: topologyNames.hostPort(G, h),
              mac: mac(i),
              ip: ip(i),
              dpu: { id: 'dpu-1' },
              access: 'None' as const,
            },
          ]
        : [],
    ),
    policies,
  }
}

const denyH1ToH2: GroupPolicyRule = {
  name: 'deny-h1',
  direction: 'ingress',
  action: 'deny',
  hosts: ['h2'],
  peer: { hosts: ['h1'] },
  protocol: 'any',
  priority: 100,
}

t.test('policies on a real central, traced', async (t) => {
  const stack = await withStack(t, { ovn: true, redis: false, frr: false })
  const ovn = stack.ovn
  if (!ovn) throw new Error('stack started without OVN')
  const client = await OvsdbClient.connect(ovn.nb.unix)
  t.teardown(() => client.close())
  const env = { ...process.env, OVN_RUNDIR: ovn.runDir }
  const nbctl = async (...args: string[]) =>
    (await run('ovn-nbctl', [`--db=${ovn.nb.unix}`, ...args], { env })).stdout
  const apply = async (s: GroupTopologySpec) => {
    const result = await applyGroupTopology(client, s)
    await nbctl('--wait=sb', 'sync')
    return result
  }

  /**
   * Where a packet from host `from` to host `to` ends: the port it leaves by, or 'dropped'.
   * `ct`: the conntrack state both its lookups (the switch's ingress and egress) find.
   */
  const fate = async (from: number, to: number, l4: string, ct = 'new') => {
    const flow = [
      `inport == "${topologyNames.hostPort(G, hosts[from] ?? '')}"`,
      `eth.src == ${mac(from)} && eth.dst == ${mac(to)}`,
      `ip4.src == ${ip(from)} && ip4.dst == ${ip(to)} && ip.ttl == 64 && ${l4}`,
    ].join(' && ')
    const { stdout } = await run(
      'ovn-trace',
      [
        `--db=${ovn.sb.unix}`,
        '--minimal',
        `--ct=${ct}`,
        `--ct=${ct}`,
        topologyNames.switch(G),
        flow,
      ],
      { env },
    )
    return [...stdout.matchAll(/output\("([^"]+)"\)/g)].map((m) => m[1]).join() || 'dropped'
  }
  const icmp = 'icmp4.type == 8 && icmp4.code == 0'
  const tcp = (port: number) => `tcp && tcp.src == 40000 && tcp.dst == ${port} && tcp.flags == 2`
  const udp = (port: number) => `udp && udp.src == 40000 && udp.dst == ${port}`
  const port = (h: number) => topologyNames.hostPort(G, hosts[h] ?? '')

  t.match(await apply(spec([])), { changed: true })
  t.equal(await fate(0, 1, icmp), port(1), 'no rules: h1 → h2 is delivered')
  t.equal(await nbctl('--bare', '--columns=name', 'list', 'Port_Group'), '', 'and no port group')

  await t.test('a deny rule drops h1 → h2 only', async (t) => {
    await apply(spec([denyH1ToH2]))
    t.equal(await fate(0, 1, icmp), 'dropped', 'h1 → h2 ping')
    t.equal(await fate(0, 1, tcp(80)), 'dropped', 'h1 → h2 TCP')
    t.equal(await fate(2, 1, icmp), port(1), 'h3 → h2 still flows')
    t.equal(await fate(1, 0, icmp), port(0), 'h2 → h1 still flows (the rule is ingress on h2)')
    t.equal(await fate(0, 2, tcp(80)), port(2), 'h1 → h3 still flows')
    t.equal(
      await fate(0, 1, 'tcp && tcp.src == 80 && tcp.dst == 40000 && tcp.flags == 0x12', 'est,rpl'),
      port(1),
      "h1's reply to a connection h2 opened passes: the switch is stateful",
    )
    const groups = await nbctl('--bare', '--columns=name', 'list', 'Port_Group')
    t.same(
      groups.split(/\s+/).filter(Boolean).sort(),
      [
        policyNames.all(G),
        policyNames.peers(G, 'deny-h1'),
        policyNames.targets(G, 'deny-h1'),
      ].sort(),
    )
  })

  await t.test('protocol and ports narrow a rule; an earlier allow wins', async (t) => {
    const everyHost: GroupPolicyRule = {
      name: 'deny-ssh',
      direction: 'ingress',
      action: 'deny',
      peer: { cidr: '10.20.0.0/24' },
      protocol: 'tcp',
      ports: { from: 22, to: 23 },
      priority: 100,
    }
    const allowFromH3: GroupPolicyRule = {
      name: 'allow-h3-ssh',
      direction: 'ingress',
      action: 'allow',
      peer: { hosts: ['h3'] },
      protocol: 'tcp',
      ports: { from: 22, to: 22 },
      priority: 50,
    }
    const denyUdpEgress: GroupPolicyRule = {
      name: 'no-dns-out',
      direction: 'egress',
      action: 'deny',
      hosts: ['h1'],
      peer: { cidr: '10.20.0.4/32' },
      protocol: 'udp',
      ports: { from: 53, to: 53 },
      priority: 100,
    }
    await apply(spec([everyHost, allowFromH3, denyUdpEgress]))
    t.equal(await fate(0, 1, tcp(22)), 'dropped', 'h1 → h2:22 (tcp 22-23 denied from the subnet)')
    t.equal(await fate(0, 1, tcp(23)), 'dropped', 'h1 → h2:23')
    t.equal(await fate(0, 1, tcp(24)), port(1), 'h1 → h2:24 is outside the range')
    t.equal(await fate(0, 1, icmp), port(1), 'h1 → h2 ping is not tcp')
    t.equal(await fate(2, 1, tcp(22)), port(1), 'h3 → h2:22: the allow rule comes first')
    t.equal(await fate(2, 1, tcp(23)), 'dropped', 'h3 → h2:23: the allow names port 22 only')
    t.equal(await fate(0, 2, udp(53)), 'dropped', 'h1 → h3 udp 53: egress deny on h1')
    t.equal(await fate(0, 2, udp(54)), port(2), 'h1 → h3 udp 54')
    t.equal(await fate(1, 2, udp(53)), port(2), 'h2 → h3 udp 53: the egress rule is on h1 only')
  })

  await t.test('removing the rules restores traffic and removes their rows', async (t) => {
    t.match(await apply(spec([])), { changed: true })
    t.equal(await fate(0, 1, icmp), port(1))
    t.equal(await fate(0, 1, tcp(22)), port(1))
    t.equal(await nbctl('--bare', '--columns=name', 'list', 'Port_Group'), '')
    const acls = (await nbctl('--bare', '--columns=match', 'list', 'ACL')).split('\n')
    t.same(
      acls.filter((m) => m.trim() !== '' && !m.startsWith('inport == "')),
      [],
      "no policy ACL left (the public switches' fabric guards stay)",
    )
  })

  await t.test('port groups follow the hosts', async (t) => {
    await apply(spec([denyH1ToH2]))
    const members = async (pg: string) =>
      (await nbctl('--bare', '--columns=ports', 'find', 'Port_Group', `name=${pg}`))
        .split(/\s+/)
        .filter(Boolean).length
    t.equal(await members(policyNames.all(G)), 3)
    t.match(await apply(spec([denyH1ToH2], ['h1', 'h3'])), { changed: true })
    t.equal(await members(policyNames.all(G)), 2, 'h2 left: two hosts')
    t.equal(
      await nbctl(
        '--bare',
        '--columns=name',
        'find',
        'Port_Group',
        `name=${policyNames.targets(G, 'deny-h1')}`,
      ),
      '',
      'the rule has no target left: its port group and ACL are gone',
    )
    t.match(await apply(spec([denyH1ToH2])), { changed: true })
    t.equal(await members(policyNames.all(G)), 3, 'h2 is back')
    t.equal(await fate(0, 1, icmp), 'dropped', 'and the rule applies to it again')
    t.match(await apply(spec([denyH1ToH2])), { changed: false }, 'a second apply changes nothing')
  })
})

/**
 * A group's topology and status stay true to its hosts: hosts in extra subnets are routed,
 * one host the topology cannot fully build does not stall its group, the members' count and
 * NAT IPs follow every attach and detach, NB refusing the topology makes the group Failed
 * (and Ready again once it accepts it), and a changed `dhcpServer` or `extraSubnets`
 * reaches IPAM, NB and the DPU agents serving the group.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { ValidationError } from '../../app/index.ts'
import type { Condition, ResourceGroup } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import {
  DHCP_SERVER,
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from './fixtures.ts'
import { northdControl } from './scenarios.ts'

const run = promisify(execFile)

const groupWhere = (p: Pipeline, name: string, check: (g: ResourceGroup) => boolean) =>
  until(
    () => p.controller.store.groups.get(name),
    (g) => g !== undefined && check(g),
  )
const hostReady = (p: Pipeline, name: string, attempt = 1) =>
  until(
    () => p.controller.store.hosts.get(name),
    (h) => h?.status.phase === 'Ready' && (h.status.attempt ?? 1) >= attempt,
  )
const condition = (g: ResourceGroup | undefined, type: string): Condition | undefined =>
  g?.status.conditions.find((c) => c.type === type)

/** The networks of the group's distributed router on its switch, sorted. */
async function routerNetworks(p: Pipeline, group: string): Promise<string[]> {
  const out = await p.nbctl(
    'get',
    'Logical_Router_Port',
    topologyNames.routerSwitchPort(group),
    'networks',
  )
  return [...out.matchAll(/"([^"]+)"/g)].map((m) => m[1] ?? '').sort()
}

t.test(
  'hosts in extra subnets are routed: given an address there, or when the primary pool is full',
  async (t) => {
    const p = await startPipeline(t)
    await p.agent('dpu-1')
    await p.agent('dpu-2')
    await p.client.applyGroup('group-x', {
      ...groupSpec('tenant-x', '10.10.10.0/30', '10.10.10.1'),
      extraSubnets: [
        { cidr: '10.20.0.0/24', gateway: '10.20.0.1' },
        { cidr: 'fd00:20::/64', gateway: 'fd00:20::1' },
      ],
    })
    await p.client.applyHost('host-1', hostSpec('group-x', 'dpu-1', 1, { identifier: 'pf0' }))
    await hostReady(p, 'host-1')
    const hosts = {
      'host-2': hostSpec('group-x', 'dpu-2', 2, {
        identifier: 'pf0',
        hostIP: '10.20.0.5',
        hostAccess: 'FabricAccess',
      }),
      'host-3': hostSpec('group-x', 'dpu-1', 3, { identifier: 'pf1' }),
      'host-6': hostSpec('group-x', 'dpu-2', 6, { identifier: 'pf1', hostIP: 'fd00:20::6' }),
    }
    for (const [name, spec] of Object.entries(hosts)) await p.client.applyHost(name, spec)
    const addresses: Record<string, string | undefined> = {}
    for (const name of ['host-1', ...Object.keys(hosts)]) {
      addresses[name] = (await hostReady(p, name))?.status.hostAccessIPs?.hostIP
    }
    t.same(
      addresses,
      {
        'host-1': '10.10.10.2',
        'host-2': '10.20.0.5',
        'host-3': '10.20.0.2',
        'host-6': 'fd00:20::6',
      },
      'every host is Ready; host-3 got the extra subnet’s first address (the /30 has one)',
    )
    t.same(
      await routerNetworks(p, 'group-x'),
      ['10.10.10.1/30', '10.20.0.1/24', 'fd00:20::1/64'],
      'the distributed router is in every subnet, IPv6 included',
    )
    t.same(
      await p.natRules(topologyNames.gatewayRouter('group-x', 'dpu-2')),
      [
        'dnat_and_snat 172.18.0.112 10.20.0.5',
        'snat 172.18.0.112 10.10.10.0/30',
        'snat 172.18.0.112 10.20.0.0/24',
      ],
      'FabricAccess in the extra subnet; both IPv4 subnets leave as the NAT IP',
    )
    const group = await groupWhere(
      p,
      'group-x',
      (g) => g.status.managedResourceCount === 4 && g.status.phase === 'Ready',
    )
    t.equal(group?.status.configsSynced, true, 'every host in place')
    t.equal(condition(group, 'Degraded'), undefined, 'nothing was left out')

    await t.test('ovn-trace: across subnets, to a gateway, and out to the fabric', async (t) => {
      await p.nbctl('--wait=sb', 'sync')
      const lrMac = (
        await p.nbctl(
          'get',
          'Logical_Router_Port',
          topologyNames.routerSwitchPort('group-x'),
          'mac',
        )
      )
        .trim()
        .replaceAll('"', '')
      const trace = async (from: string, mac: string, flow: string) => {
        const inport = `inport == "${topologyNames.hostPort('group-x', from)}" && eth.src == ${mac} && eth.dst == ${lrMac}`
        const { stdout } = await run('ovn-trace', [
          `--db=${p.sb}`,
          '--minimal',
          topologyNames.switch('group-x'),
          `${inport} && ${flow}`,
        ])
        return {
          text: stdout,
          outputs: [...stdout.matchAll(/output\("([^"]+)"\)/g)].map((m) => m[1]),
        }
      }
      const mac = (name: keyof typeof hosts | 'host-1') =>
        String((name === 'host-1' ? hostSpec('group-x', 'dpu-1', 1) : hosts[name]).hostMAC)
      const icmp4 = (src: string, dst: string) =>
        `ip4.src == ${src} && ip4.dst == ${dst} && ip.ttl == 64 && icmp4.type == 8`

      const across = await trace('host-2', mac('host-2'), icmp4('10.20.0.5', '10.10.10.2'))
      t.same(
        across.outputs,
        [topologyNames.hostPort('group-x', 'host-1')],
        '10.20.0.5 → 10.10.10.2 on another DPU: routed by the distributed router',
      )
      t.notMatch(across.text, 'ct_snat', 'not through a gateway router: its source stays its own')
      const gateway = await trace(
        'host-6',
        mac('host-6'),
        'ip6.src == fd00:20::6 && ip6.dst == fd00:20::1 && ip.ttl == 64 && icmp6.type == 128 && icmp6.code == 0',
      )
      t.same(
        gateway.outputs,
        [topologyNames.hostPort('group-x', 'host-6')],
        'the IPv6 host’s gateway answers its ping',
      )
      // ovn-trace resolves the fabric gateway from SB MAC_Binding, as ovn-controller learns it.
      const gatewayRouter = topologyNames.gatewayRouter('group-x', 'dpu-1')
      const sbctl = async (...args: string[]) =>
        (await run('ovn-sbctl', [`--db=${p.sb}`, ...args])).stdout.trim()
      const datapath = await sbctl(
        '--bare',
        '--columns=_uuid',
        'find',
        'Datapath_Binding',
        `external_ids:name="${gatewayRouter}"`,
      )
      await sbctl(
        'create',
        'MAC_Binding',
        `logical_port="${topologyNames.gatewayPublicPort('group-x', 'dpu-1')}"`,
        'ip=172.18.0.1',
        'mac="0a:fa:b0:00:00:01"',
        `datapath=${datapath}`,
      )
      const out = await trace('host-3', mac('host-3'), icmp4('10.20.0.2', '198.51.100.7'))
      t.same(
        out.outputs,
        [topologyNames.localnetPort('group-x', 'dpu-1')],
        '10.20.0.2 → outside leaves through its own DPU',
      )
      t.match(
        out.text,
        `ct_snat(ip4.src=${dpuFabricIps('dpu-1')[1]})`,
        'SNATed to that DPU’s NAT IP',
      )
    })
  },
)

t.test('a host the topology cannot fully build does not stall its group', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  await p.client.applyGroup('group-s', {
    ...groupSpec('tenant-s', '10.10.10.0/30', '10.10.10.1'),
    extraSubnets: [{ cidr: 'fd00:30::/64', gateway: 'fd00:30::1' }, { cidr: '10.20.20.0/24' }],
  })
  await p.client.applyHost(
    'host-1',
    hostSpec('group-s', 'dpu-1', 1, { identifier: 'pf0', hostIP: 'fd00:30::11' }),
  )
  await hostReady(p, 'host-1')
  // The public IP pool is empty: the host holds the /30's one address, and no public IP.
  await p.client.applyHost(
    'host-p',
    hostSpec('group-s', 'dpu-2', 2, { identifier: 'pf0', hostAccess: 'PublicAccess' }),
  )
  await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Failed',
  )
  // The /30 is full: FabricAccess is given an IPv4 address of the subnet without a
  // gateway, which has no router to NAT it.
  await p.client.applyHost(
    'host-f',
    hostSpec('group-s', 'dpu-1', 3, { identifier: 'pf1', hostAccess: 'FabricAccess' }),
  )
  await p.client.applyHost(
    'host-n',
    hostSpec('group-s', 'dpu-2', 4, { identifier: 'pf1', hostIP: 'fd00:30::44' }),
  )
  t.equal((await hostReady(p, 'host-n'))?.status.phase, 'Ready', 'a later host still attaches')
  t.ok(await p.switchPort(topologyNames.hostPort('group-s', 'host-n')), 'with its port in NB')
  // host-p failed at its public IP, before its attach wrote it: no apply writes its rows.
  t.equal(
    await p.switchPort(topologyNames.hostPort('group-s', 'host-p')),
    undefined,
    'the host Failed waiting for a public IP has no port in NB',
  )
  t.same(
    (await p.natRules(topologyNames.gatewayRouter('group-s', 'dpu-2'))).filter((r) =>
      r.includes('10.10.10.2'),
    ),
    [],
    'nor a NAT rule to its address',
  )
  // Ready once host-f is in place too: what the topology left out stalls nothing.
  const group = await groupWhere(
    p,
    'group-s',
    (g) => condition(g, 'Degraded') !== undefined && g.status.phase === 'Ready',
  )
  t.match(
    condition(group, 'Degraded'),
    {
      status: 'True',
      reason: 'TopologyIncomplete',
      message: /host host-f has FabricAccess, but its subnet 10\.20\.20\.0\/24 has no gateway/,
    },
    'the group says what it left out',
  )

  await p.client.deleteHost('host-f')
  const whole = await groupWhere(
    p,
    'group-s',
    (g) => condition(g, 'Degraded')?.reason === 'HostsNotReady' && g.status.phase === 'Ready',
  )
  t.match(
    condition(whole, 'Degraded'),
    {
      status: 'True',
      reason: 'HostsNotReady',
      message: /^1 of 3 hosts not Ready: host-p \(Failed: POOL_EXHAUSTED\)$/,
    },
    'once that host is gone the topology is whole; the group still names the host that failed on its own',
  )
  t.equal(whole?.status.configsSynced, true, 'and every other host is in place')
})

t.test('hosts on one DPU share its NAT IP: another one is refused', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-n', groupSpec('tenant-n'))
  await p.client.applyHost('host-1', hostSpec('group-n', 'dpu-1', 1, { identifier: 'pf0' }))
  await hostReady(p, 'host-1')
  const [encap] = dpuFabricIps('dpu-1')
  const otherNat = {
    resourceGroup: 'group-n',
    hostMAC: '52:54:00:00:05:02',
    identifier: 'pf1',
    dpu: { id: 'dpu-1', ips: [encap, '172.18.0.199'] },
  }
  const refused = await p.client.applyHost('host-2', otherNat).catch((e: unknown) => e)
  t.type(refused, ValidationError, 'a second None host with another NAT IP is refused')
  t.match((refused as ValidationError).issues, [
    { path: 'dpu.ips', message: /in the inventory are/ },
  ])
  await t.rejects(
    p.client.applyDpu('dpu-1', {
      tenantId: 'tenant-n',
      fabricIps: [encap, '172.18.0.199'],
      hostPorts: ['pf0', 'pf1'],
    }),
    'nor may the DPU’s NAT IP change while it serves a host',
  )
  const { dpu: _ips, ...fromInventory } = otherNat
  await p.client.applyHost('host-2', { ...fromInventory, dpu: { id: 'dpu-1' } })
  const second = await hostReady(p, 'host-2')
  t.same(second?.spec.dpu.ips, dpuFabricIps('dpu-1'), 'the inventory gives it the same NAT IP')
  t.same(await p.natRules(topologyNames.gatewayRouter('group-n', 'dpu-1')), [
    'snat 172.18.0.111 10.10.10.0/24',
  ])
})

t.test('the members’ count and NAT IPs follow every attach and detach', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  await p.client.applyGroup('group-c', groupSpec('tenant-c'))
  const created = await groupWhere(p, 'group-c', (g) => g.status.phase === 'Ready')
  t.match(created?.status, { phase: 'Ready', managedResourceCount: 0, snatIPs: [] })
  await p.client.applyHost(
    'host-1',
    hostSpec('group-c', 'dpu-1', 1, { hostAccess: 'FabricAccess' }),
  )
  await p.client.applyHost('host-2', hostSpec('group-c', 'dpu-2', 2))
  const two = await groupWhere(p, 'group-c', (g) => g.status.managedResourceCount === 2)
  t.same(two?.status.snatIPs, ['172.18.0.111', '172.18.0.112'])
  t.equal(two?.specVersion, 1, 'no new group spec was needed')
  await p.client.deleteHost('host-2')
  const one = await groupWhere(p, 'group-c', (g) => g.status.managedResourceCount === 1)
  t.same(one?.status.snatIPs, ['172.18.0.111'])
})

t.test('NB refusing the topology makes the group Failed; accepting it, Ready again', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-r', groupSpec('tenant-r'))
  await groupWhere(p, 'group-r', (g) => g.status.phase === 'Ready')
  // A port the operator made holds the name the host's port needs (names are unique in NB).
  const taken = topologyNames.hostPort('group-r', 'host-1')
  await p.nbctl('ls-add', 'operator-ls', '--', 'lsp-add', 'operator-ls', taken)
  await p.client.applyHost('host-1', hostSpec('group-r', 'dpu-1', 1))
  const failed = await groupWhere(p, 'group-r', (g) => g.status.phase === 'Failed')
  t.match(condition(failed, 'OvnConfigured'), {
    status: 'False',
    reason: 'OVSDB_CONSTRAINT_VIOLATION',
    message: /constraint violation/,
  })
  await p.nbctl('ls-del', 'operator-ls')
  const ready = await groupWhere(p, 'group-r', (g) => g.status.phase === 'Ready')
  t.match(condition(ready, 'OvnConfigured'), { status: 'True' })
  t.equal((await hostReady(p, 'host-1'))?.status.phase, 'Ready')
})

t.test(
  'a changed dhcpServer or extraSubnets reaches IPAM, NB, the agents and the status',
  async (t) => {
    const p = await startPipeline(t)
    const agent = await p.agent('dpu-1')
    await p.client.applyGroup('group-d', groupSpec('tenant-d'))
    await p.client.applyHost('host-1', hostSpec('group-d', 'dpu-1', 1, { identifier: 'pf0' }))
    await hostReady(p, 'host-1')
    const first = await p.controller.store.groups.get('group-d')
    t.notOk(first && 'dhcpCircuitId' in first.status, 'no circuit id without a DHCP server')
    const relayPort = topologyNames.relayPort('group-d', 'dpu-1')
    /** The `configure` jobs the DPU agent ran, oldest first. */
    const configures = async () =>
      agent.jobs
        .filter((j) => j.name === 'configure')
        .map((j) => j.data as { group: { dhcpServer?: string; relay?: object } })

    await p.client.applyGroup('group-d', { ...groupSpec('tenant-d'), dhcpServer: DHCP_SERVER })
    const relaying = await groupWhere(p, 'group-d', (g) => g.status.observedVersion === 2)
    const circuit = relaying?.status.dhcpCircuitId
    t.match(
      circuit,
      /^hzr[0-9a-f]{8}$/,
      'a DHCP server added later: the status names its circuit id',
    )
    await until(configures, (c) => c.some((d) => d.group.dhcpServer === DHCP_SERVER))
    t.match(
      (await configures()).at(-1)?.group,
      { dhcpServer: DHCP_SERVER, relay: { portName: circuit, ip: /^10\.10\.10\./ } },
      'the DPU agent is sent the relay',
    )
    await hostReady(p, 'host-1', 2)
    t.match(
      await p.switchPort(relayPort),
      { addresses: [/ 10\.10\.10\./] },
      'and NB has the relay port',
    )

    await p.client.applyGroup('group-d', groupSpec('tenant-d'))
    const plain = await groupWhere(p, 'group-d', (g) => g.status.observedVersion === 3)
    t.notOk(plain && 'dhcpCircuitId' in plain.status, 'the DHCP server removed: no circuit id')
    await until(configures, (c) => c.length >= 3)
    t.notOk((await configures()).at(-1)?.group.dhcpServer, 'the agent is told there is no relay')
    t.equal(await p.switchPort(relayPort), undefined, 'the relay port left NB')
    t.notOk(
      (await p.controller.ipam.allocations('group-d')).some((a) => a.owner.startsWith('relay/')),
      'and its address went back to the pool',
    )

    const extra = {
      ...groupSpec('tenant-d'),
      extraSubnets: [{ cidr: '10.40.0.0/24', gateway: '10.40.0.1' }],
    }
    await p.client.applyGroup('group-d', extra)
    await groupWhere(
      p,
      'group-d',
      (g) => g.status.observedVersion === 4 && g.status.phase === 'Ready',
    )
    t.same(
      await routerNetworks(p, 'group-d'),
      ['10.10.10.1/24', '10.40.0.1/24'],
      'an extra subnet added later is routed',
    )
    await p.client.applyHost(
      'host-2',
      hostSpec('group-d', 'dpu-1', 2, { identifier: 'pf1', hostIP: '10.40.0.9' }),
    )
    t.equal(
      (await hostReady(p, 'host-2'))?.status.hostAccessIPs?.hostIP,
      '10.40.0.9',
      'a host attaches in it',
    )

    // Refused before it is stored (409 over the API), naming the field and the holder.
    await t.rejects(p.client.applyGroup('group-d', groupSpec('tenant-d')), {
      code: 'CONFLICT',
      issues: [{ path: 'extraSubnets', message: /10\.40\.0\.9 is held by host-2/ }],
    })
    t.same(
      await routerNetworks(p, 'group-d'),
      ['10.10.10.1/24', '10.40.0.1/24'],
      'and NB keeps it routed',
    )
  },
)

t.test(
  "a group's phase follows its hosts: Configuring while one waits for its agent, Ready once it is in place",
  async (t) => {
    const p = await startPipeline(t)
    await p.client.applyGroup('group-h', groupSpec())
    const created = await groupWhere(p, 'group-h', (g) => g.status.phase === 'Ready')
    t.equal(created?.status.configsSynced, true, 'a group without hosts is Ready and synced')

    // No agent answers for dpu-1 yet: the host's change is on its way.
    await p.client.applyHost('host-h', hostSpec('group-h', 'dpu-1', 1))
    const waiting = await groupWhere(p, 'group-h', (g) => g.status.phase === 'Configuring')
    t.equal(waiting?.status.configsSynced, false, 'Configuring, not synced, while host-h waits')
    t.equal(condition(waiting, 'Degraded'), undefined, 'waiting is not a failure')

    await p.agent('dpu-1')
    await hostReady(p, 'host-h')
    const ready = await groupWhere(p, 'group-h', (g) => g.status.phase === 'Ready')
    t.equal(ready?.status.configsSynced, true, 'Ready and synced once its host is')
    const events = (await p.controller.store.events.list('rg', 'group-h')).map((e) => e.message)
    t.ok(
      events.some((m) => /Ready → Configuring|Configuring → Ready/.test(m)),
      `the group's events tell the transitions (${events.join(' | ')})`,
    )
  },
)

t.test(
  'a group is Provisioning until its ovn-northd has made its topology into the SB',
  async (t) => {
    const p = await startPipeline(t)
    const northd = northdControl(t, p)
    await northd('pause')
    await p.client.applyGroup('group-w', groupSpec())
    // Its switch and router are in NB: only northd is missing.
    await until(
      () => p.nbctl('ls-list'),
      (list) => list.includes(topologyNames.switch('group-w')),
    )
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const waiting = await p.controller.store.groups.get('group-w')
    t.equal(waiting?.status.phase, 'Provisioning', 'NB applied, northd paused: still Provisioning')
    t.equal(waiting?.status.configsSynced, false)

    await northd('resume')
    const ready = await groupWhere(p, 'group-w', (g) => g.status.phase === 'Ready')
    t.equal(ready?.status.configsSynced, true, 'Ready once northd made it into the SB')
  },
)

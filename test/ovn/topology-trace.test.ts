/**
 * The compiled topology on a real OVN central (NB + SB + northd), checked with
 * ovn-trace: where packets go and which NAT applies.
 *
 * ovn-trace (OVN 23.03) stops a trace at the `ct_snat;` (un-SNAT) action of any gateway
 * router, so inbound paths are checked in two halves: fabric → the right gateway
 * router (trace), the router's DNAT to the host (its logical flows), and gateway
 * router → host (trace from the gateway router's transit port).
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { Database } from '../../lib/ovn/database.ts'
import {
  applyGroupTopology,
  deleteGroupTopology,
  type GroupTopologySpec,
  type NbTables,
  nbSchema,
  OvsdbClient,
  type SbTables,
  sbSchema,
  topologyNames,
} from '../../lib/ovn/index.ts'
import { withStack } from '../helpers/stack.ts'

const run = promisify(execFile)
const nb = new Database<NbTables>(nbSchema)
const sb = new Database<SbTables>(sbSchema)
const FABRIC_GW = '172.18.0.1'
const FABRIC_GW_MAC = '0a:fa:b0:00:00:01'
const OUTSIDE_MAC = '0a:11:11:11:11:11'

function groupSpec(
  name: string,
  dpus: [string, string],
  natIps: [string, string],
): GroupTopologySpec {
  return {
    name,
    cidr: '10.10.10.0/24',
    gateway: '10.10.10.1',
    dummyFabricIp: '172.18.0.254/24',
    fabricGatewayIp: FABRIC_GW,
    members: [
      {
        hostName: 'h1',
        logicalPort: `${topologyNames.hostPort(name, 'h1')}`,
        mac: '0a:00:00:00:00:01',
        ip: '10.10.10.2',
        dpu: { id: dpus[0], natIp: natIps[0] },
        access: 'PublicAccess',
        publicIp: name === 'alpha' ? '203.0.113.10' : '203.0.113.20',
      },
      {
        hostName: 'h2',
        logicalPort: `${topologyNames.hostPort(name, 'h2')}`,
        mac: '0a:00:00:00:00:02',
        ip: '10.10.10.3',
        dpu: { id: dpus[1], natIp: natIps[1] },
        access: 'FabricAccess',
      },
    ],
  }
}

t.test('compiled topology forwards and NATs as designed', async (t) => {
  const stack = await withStack(t, { ovn: true, redis: false, frr: false })
  const ovn = stack.ovn
  if (!ovn) throw new Error('stack started without OVN')
  const client = await OvsdbClient.connect(ovn.nb.unix)
  t.teardown(() => client.close())
  const sbClient = await OvsdbClient.connect(ovn.sb.unix)
  t.teardown(() => sbClient.close())
  const env = { ...process.env, OVN_RUNDIR: ovn.runDir }
  const sync = () => run('ovn-nbctl', [`--db=${ovn.nb.unix}`, '--wait=sb', 'sync'], { env })

  const alpha = groupSpec('alpha', ['dpu-1', 'dpu-2'], ['172.18.0.105', '172.18.0.107'])
  const beta = groupSpec('beta', ['dpu-3', 'dpu-4'], ['172.18.0.109', '172.18.0.111'])
  t.match(await applyGroupTopology(client, alpha), { changed: true })
  t.match(await applyGroupTopology(client, beta), { changed: true })
  t.match(
    await applyGroupTopology(client, alpha),
    { changed: false, ops: 0 },
    'second apply is a no-op',
  )
  await sync()

  const portMac = async (name: string) => {
    const [r] = await client.transact(nb.name, [
      nb.select('Logical_Router_Port', [['name', '==', name]], ['mac']),
    ])
    const mac = nb.decodeRows('Logical_Router_Port', r?.rows)[0]?.mac
    if (!mac) throw new Error(`no router port ${name}`)
    return mac
  }
  // ovn-trace resolves next hops from SB MAC_Binding, as ovn-controller would have learnt.
  const learnFabricGateway = async (group: string, dpu: string) => {
    const [dp] = await sbClient.transact(sb.name, [
      sb.select('Datapath_Binding', [
        ['external_ids', 'includes', { name: `${topologyNames.gatewayRouter(group, dpu)}` }],
      ]),
    ])
    const datapath = sb.decodeRows('Datapath_Binding', dp?.rows)[0]?._uuid
    if (!datapath) throw new Error(`no datapath for ${group}/${dpu}`)
    await sbClient.transact(sb.name, [
      sb.insert('MAC_Binding', {
        logical_port: `${topologyNames.gatewayPublicPort(group, dpu)}`,
        ip: FABRIC_GW,
        mac: FABRIC_GW_MAC,
        datapath,
      }),
    ])
  }
  for (const [g, d] of [
    ['alpha', 'dpu-1'],
    ['alpha', 'dpu-2'],
    ['beta', 'dpu-3'],
    ['beta', 'dpu-4'],
  ] as const) {
    await learnFabricGateway(g, d)
  }
  const trace = async (datapath: string, flow: string) =>
    (await run('ovn-trace', [`--db=${ovn.sb.unix}`, '--minimal', datapath, flow], { env })).stdout
  const icmp = (src: string, dst: string) =>
    `ip4.src == ${src} && ip4.dst == ${dst} && ip.ttl == 64 && icmp4.type == 8`
  const snatTo = (ip: string) => `ct_snat(ip4.src=${ip})`
  const outputs = (text: string) => [...text.matchAll(/output\("([^"]+)"\)/g)].map((m) => m[1])

  for (const g of ['alpha', 'beta']) {
    const other = g === 'alpha' ? 'beta' : 'alpha'
    const [dpu1, dpu2] = g === 'alpha' ? ['dpu-1', 'dpu-2'] : ['dpu-3', 'dpu-4']
    const nat1 = g === 'alpha' ? '172.18.0.105' : '172.18.0.109'
    const nat2 = g === 'alpha' ? '172.18.0.107' : '172.18.0.111'
    const public1 = g === 'alpha' ? '203.0.113.10' : '203.0.113.20'
    const lrMac = await portMac(`${topologyNames.routerSwitchPort(g)}`)

    await t.test(`${g}: host → host on another DPU reaches the peer's port`, async (t) => {
      const out = await trace(
        `${topologyNames.switch(g)}`,
        `inport == "${topologyNames.hostPort(g, 'h1')}" && eth.src == 0a:00:00:00:00:01 && eth.dst == 0a:00:00:00:00:02 && ${icmp('10.10.10.2', '10.10.10.3')}`,
      )
      t.same(outputs(out), [`${topologyNames.hostPort(g, 'h2')}`])
    })

    await t.test(
      `${g}: host → outside leave through their own DPU's localnet, SNATed`,
      async (t) => {
        const out = await trace(
          `${topologyNames.switch(g)}`,
          `inport == "${topologyNames.hostPort(g, 'h1')}" && eth.src == 0a:00:00:00:00:01 && eth.dst == ${lrMac} && ${icmp('10.10.10.2', '8.8.8.8')}`,
        )
        t.same(outputs(out), [`${topologyNames.localnetPort(g, dpu1)}`])
        t.match(out, snatTo(public1), 'a PublicAccess host leaves as its public IP')
        t.match(out, `eth.dst = ${FABRIC_GW_MAC}`, 'sent to the fabric gateway')
        t.notMatch(out, other)
        const out2 = await trace(
          `${topologyNames.switch(g)}`,
          `inport == "${topologyNames.hostPort(g, 'h2')}" && eth.src == 0a:00:00:00:00:02 && eth.dst == ${lrMac} && ${icmp('10.10.10.3', '8.8.8.8')}`,
        )
        t.same(
          outputs(out2),
          [`${topologyNames.localnetPort(g, dpu2)}`],
          'the other host leaves through its own DPU',
        )
        t.match(out2, snatTo(nat2), 'a FabricAccess host leaves as its DPU NAT IP')
        t.notMatch(out2, other)
      },
    )

    for (const [label, external] of [
      ['NAT IP (FabricAccess)', nat1],
      ['public IP (PublicAccess)', public1],
    ] as const) {
      await t.test(`${g}: fabric → ${label} reaches host h1`, async (t) => {
        const pubMac = await portMac(`${topologyNames.gatewayPublicPort(g, dpu1)}`)
        const toGateway = await run(
          'ovn-trace',
          [
            `--db=${ovn.sb.unix}`,
            '--summary',
            `${topologyNames.publicSwitch(g, dpu1)}`,
            `inport == "${topologyNames.localnetPort(g, dpu1)}" && eth.src == ${OUTSIDE_MAC} && eth.dst == ${pubMac} && ${icmp('172.18.0.50', external)}`,
          ],
          { env },
        )
        t.match(
          toGateway.stdout,
          `ingress(dp="${topologyNames.gatewayRouter(g, dpu1)}", inport="${topologyNames.gatewayPublicPort(g, dpu1)}")`,
          'enters the gateway router',
        )
        const { stdout: lflows } = await run(
          'ovn-sbctl',
          [`--db=${ovn.sb.unix}`, 'lflow-list', `${topologyNames.gatewayRouter(g, dpu1)}`],
          { env },
        )
        const dnat = lflows
          .split('\n')
          .filter(
            (l) =>
              l.includes('lr_in_dnat') &&
              l.includes(`ip4.dst == ${external}`) &&
              l.includes('ct_dnat'),
          )
        t.ok(
          dnat.some((l) => l.includes('ct_dnat(10.10.10.2)')),
          `${external} is DNATed to h1`,
        )
        const gwMac = await portMac(`${topologyNames.gatewayTransitPort(g, dpu1)}`)
        const lrTsMac = await portMac(`${topologyNames.routerTransitPort(g, dpu1)}`)
        const back = await trace(
          `${topologyNames.transitSwitch(g, dpu1)}`,
          `inport == "${topologyNames.transitGatewayPort(g, dpu1)}" && eth.src == ${gwMac} && eth.dst == ${lrTsMac} && ${icmp('172.18.0.50', '10.10.10.2')}`,
        )
        t.same(
          outputs(back),
          [`${topologyNames.hostPort(g, 'h1')}`],
          'and from the gateway router to h1',
        )
      })
    }
  }

  await t.test('removing a host removes exactly its rows', async (t) => {
    const before = await ownedRows(client, 'alpha')
    const withoutH2 = { ...alpha, members: alpha.members.filter((m) => m.hostName !== 'h2') }
    t.match(await applyGroupTopology(client, withoutH2), { changed: true })
    const after = await ownedRows(client, 'alpha')
    const gone = [...before].filter((k) => !after.has(k))
    t.ok(gone.length > 0 && [...after].every((k) => before.has(k)), 'nothing added')
    t.ok(
      gone.every((k) => k.includes('dpu-2') || k.includes('h2')),
      `only h2 and its DPU's rows: ${gone.join(' ')}`,
    )
    t.ok(gone.includes(`Logical_Switch_Port/lsp/${topologyNames.hostPort('alpha', 'h2')}`))
    t.ok((await ownedRows(client, 'beta')).size > 0, 'the other group is untouched')
    await applyGroupTopology(client, alpha)
  })

  await t.test('a NAT row deleted by hand comes back on the next apply', async (t) => {
    await run(
      'ovn-nbctl',
      [
        `--db=${ovn.nb.unix}`,
        'lr-nat-del',
        topologyNames.gatewayRouter('alpha', 'dpu-1'),
        'dnat_and_snat',
        '203.0.113.10',
      ],
      { env },
    )
    t.notOk(
      (await ownedRows(client, 'alpha')).has(
        'NAT/nat/gw/dpu-1/dnat_and_snat/203.0.113.10/10.10.10.2',
      ),
    )
    t.match(await applyGroupTopology(client, alpha), { changed: true, ops: 2 })
    t.ok(
      (await ownedRows(client, 'alpha')).has(
        'NAT/nat/gw/dpu-1/dnat_and_snat/203.0.113.10/10.10.10.2',
      ),
    )
  })

  await t.test('rows Hydrazine does not own are never touched', async (t) => {
    await run(
      'ovn-nbctl',
      [
        `--db=${ovn.nb.unix}`,
        'ls-add',
        'operator-ls',
        '--',
        'lsp-add',
        topologyNames.switch('alpha'),
        'operator-port',
      ],
      { env },
    )
    t.match(await applyGroupTopology(client, alpha), { changed: false })
    await deleteGroupTopology(client, 'alpha')
    const { stdout } = await run('ovn-nbctl', [`--db=${ovn.nb.unix}`, 'ls-list'], { env })
    t.match(stdout, 'operator-ls')
  })

  await t.test('deleting a group leaves no Hydrazine row behind', async (t) => {
    await deleteGroupTopology(client, 'alpha')
    await deleteGroupTopology(client, 'beta')
    t.equal((await ownedRows(client, 'alpha')).size, 0)
    t.equal((await ownedRows(client, 'beta')).size, 0)
    const { stdout } = await run(
      'ovn-nbctl',
      [`--db=${ovn.nb.unix}`, '--format=csv', 'find', 'NAT', 'external_ids:hydrazine\\:group!=""'],
      { env },
    )
    t.equal(stdout.trim().split('\n').length, 1, 'ovn-nbctl finds no NAT row: only the CSV heading')
  })
})

async function ownedRows(client: OvsdbClient, group: string): Promise<Set<string>> {
  const tables = [
    'Logical_Switch',
    'Logical_Switch_Port',
    'Logical_Router',
    'Logical_Router_Port',
    'Logical_Router_Static_Route',
    'Logical_Router_Policy',
    'NAT',
    'Address_Set',
  ] as const
  const results = await client.transact(
    nb.name,
    tables.map((table) =>
      nb.select(
        table,
        [['external_ids', 'includes', { 'hydrazine:owner': `group/${group}` }]],
        ['external_ids'],
      ),
    ),
  )
  const keys = new Set<string>()
  for (const [i, table] of tables.entries()) {
    for (const row of results[i]?.rows ?? []) {
      const ids = nb.decodeRow(table, row).external_ids as Record<string, string>
      keys.add(`${table}/${ids['hydrazine:key']}`)
    }
  }
  return keys
}

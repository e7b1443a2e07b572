/**
 * Per-group DNS through the whole pipeline, on one shared NB + SB (northd running): two
 * groups on the same CIDR, each with a host whose DNS name is `web`. Each group's switch
 * refers only to its own hosts' DNS rows and northd gives each SB DNS row to that switch's
 * datapath alone; the records follow the hosts (a new DNS name, a detach; a new address is
 * `lib/ovn/topology/dns.test.ts`'s: IPAM keeps a host's address for its life),
 * a second `web` in a group is refused (409), a group may turn DNS off, and deleting the
 * groups leaves no DNS row behind (a root table: it is deleted, not collected).
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { DNS_BATCH_MS, dnsCostsRecomputes } from '../../functions/internal/group-apply.ts'
import { PROTOCOL_VERSIONS } from '../../lib/agent-protocol/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { StoreConflict } from '../../lib/state/spec-writes.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'

const ZONE = 'hydrazine.test'
const run = promisify(execFile)

/**
 * The records `group`'s switch answers with: every DNS row its `dns_records` holds. Two
 * reads (the switch's references, then the DNS rows) taken over one state of NB: read
 * again while the references changed in between (a commit that adds one host's row and
 * deletes another's would otherwise show neither).
 */
async function switchRecords(p: Pipeline, group: string): Promise<Record<string, string>> {
  const refs = async () =>
    p.nbctl(
      '--bare',
      '--columns=dns_records',
      'list',
      'Logical_Switch',
      topologyNames.switch(group),
    )
  for (;;) {
    const before = await refs()
    const json = JSON.parse(
      await p.nbctl('--format=json', '--columns=_uuid,records', 'list', 'DNS'),
    )
    if ((await refs()) !== before) continue
    const wanted = new Set(before.split(/\s+/).filter((u) => u !== ''))
    const records: Record<string, string> = {}
    for (const [[, uuid], [, map]] of json.data as [
      ['uuid', string],
      ['map', [string, string][]],
    ][]) {
      if (wanted.has(uuid)) for (const [name, value] of map) records[name] = value
    }
    return records
  }
}

/** SB DNS rows as `datapath name → record names`, read from the SB northd writes. */
async function southboundDns(p: Pipeline): Promise<Map<string, string[]>> {
  const sbctl = async (...args: string[]) =>
    (await run('ovn-sbctl', [`--db=${p.sb}`, '--format=json', ...args])).stdout
  const rows = (out: string) => (JSON.parse(out) as { data: unknown[][] }).data
  const names = new Map<string, string>()
  for (const [uuid, ids] of rows(
    await sbctl('--columns=_uuid,external_ids', 'list', 'Datapath_Binding'),
  )) {
    const map = new Map((ids as ['map', [string, string][]])[1])
    names.set((uuid as ['uuid', string])[1], map.get('name') ?? '')
  }
  const out = new Map<string, string[]>()
  for (const [records, datapaths] of rows(
    await sbctl('--columns=records,datapaths', 'list', 'DNS'),
  )) {
    const set = datapaths as ['set', ['uuid', string][]] | ['uuid', string]
    const uuids = set[0] === 'set' ? set[1].map((u) => u[1]) : [set[1] as string]
    for (const uuid of uuids) {
      const name = names.get(uuid) ?? uuid
      const keys = (records as ['map', [string, string][]])[1].map(([k]) => k)
      out.set(name, [...(out.get(name) ?? []), ...keys].sort())
    }
  }
  return out
}

const ready = (p: Pipeline, host: string) =>
  until(
    () => p.controller.store.hosts.get(host),
    (h) => h?.status.phase === 'Ready' && h.status.observedVersion === h.specVersion,
  )

t.test('per-group DNS: own names only, following the hosts', async (t) => {
  const p = await startPipeline(t, { dnsZone: ZONE })
  await p.agent('dpu-1')
  await p.agent('dpu-3')
  for (const [group, tenant] of [
    ['group-a', 'tenant-a'],
    ['group-b', 'tenant-b'],
  ] as const) {
    await p.client.applyGroup(group, groupSpec(tenant))
    await until(
      () => p.controller.store.groups.get(group),
      (g) => g?.status.phase === 'Ready',
    )
  }
  await p.client.applyHost(
    'a-web',
    hostSpec('group-a', 'dpu-1', 1, { hostIP: '10.10.10.11', hostname: 'web' }),
  )
  await p.client.applyHost('a-db', hostSpec('group-a', 'dpu-1', 2, { hostIP: '10.10.10.12' }))
  await p.client.applyHost(
    'b-web',
    hostSpec('group-b', 'dpu-3', 3, { hostIP: '10.10.10.21', hostname: 'web' }),
  )
  for (const host of ['a-web', 'a-db', 'b-web'])
    t.equal((await ready(p, host))?.status.phase, 'Ready')

  await t.test('each switch answers for its own hosts only', async (t) => {
    // a-db came right after a-web: its records ride with group-a's next DNS change, at most
    // DNS_BATCH_MS after the one that published a-web's (every ovn-controller of the group
    // recomputes on each), not with its own Ready.
    await until(
      () => switchRecords(p, 'group-a'),
      (r) => 'a-db' in r,
      DNS_BATCH_MS + 10_000,
    )
    t.same(await switchRecords(p, 'group-a'), {
      'web.group-a.hydrazine.test': '10.10.10.11',
      web: '10.10.10.11',
      '11.10.10.10.in-addr.arpa': 'web.group-a.hydrazine.test',
      'a-db.group-a.hydrazine.test': '10.10.10.12',
      'a-db': '10.10.10.12',
      '12.10.10.10.in-addr.arpa': 'a-db.group-a.hydrazine.test',
    })
    t.same(await switchRecords(p, 'group-b'), {
      'web.group-b.hydrazine.test': '10.10.10.21',
      web: '10.10.10.21',
      '21.10.10.10.in-addr.arpa': 'web.group-b.hydrazine.test',
    })
    await p.nbctl('--wait=sb', 'sync')
    const sb = await southboundDns(p)
    t.same(
      sb.get(topologyNames.switch('group-a')),
      [
        '11.10.10.10.in-addr.arpa',
        '12.10.10.10.in-addr.arpa',
        'a-db',
        'a-db.group-a.hydrazine.test',
        'web',
        'web.group-a.hydrazine.test',
      ],
      "northd gives group-a's datapath group-a's records",
    )
    t.same(
      sb.get(topologyNames.switch('group-b')),
      ['21.10.10.10.in-addr.arpa', 'web', 'web.group-b.hydrazine.test'],
      "and group-b's datapath group-b's",
    )
    t.same([...sb.keys()].sort(), [
      topologyNames.switch('group-a'),
      topologyNames.switch('group-b'),
    ])
  })

  await t.test('a second web in group-a is refused; in another group it is fine', async (t) => {
    for (const [name, extra] of [
      ['a-web2', { hostname: 'web' }],
      ['web', {}],
    ] as const) {
      const refused = await p.client.applyHost(name, hostSpec('group-a', 'dpu-1', 4, extra)).then(
        () => undefined,
        (error: unknown) => error,
      )
      t.ok(refused instanceof StoreConflict, `${name}: a conflict (409)`)
      t.match((refused as Error).message, /^DNS name web\.group-a is already in use$/)
      t.equal(await p.controller.store.hosts.get(name), undefined, `${name}: nothing stored`)
    }
  })

  await t.test('records follow a new DNS name and a detach', async (t) => {
    await p.client.applyHost(
      'a-web',
      hostSpec('group-a', 'dpu-1', 1, { hostIP: '10.10.10.11', hostname: 'www' }),
    )
    let records = await until(
      () => switchRecords(p, 'group-a'),
      (r) => 'www' in r,
    )
    t.equal(records['www.group-a.hydrazine.test'], '10.10.10.11', 'renamed')
    t.notOk('web' in records, 'the old name is gone')
    t.equal(records['11.10.10.10.in-addr.arpa'], 'www.group-a.hydrazine.test')
    // web is free in group-a again: another host may take it.
    t.ok(
      (await p.client.applyHost('a-web2', hostSpec('group-a', 'dpu-1', 4, { hostname: 'web' })))
        .jobId,
    )
    await ready(p, 'a-web2')

    await p.client.deleteHost('a-db')
    records = await until(
      () => switchRecords(p, 'group-a'),
      (r) => !('a-db' in r),
    )
    t.notOk('a-db.group-a.hydrazine.test' in records, 'a detached host has no record')
    t.ok('www' in records && 'web' in records, 'the others keep theirs')
  })

  await t.test('a group that turns DNS off has none; deleting groups leaves none', async (t) => {
    await p.client.applyGroup('group-b', { ...groupSpec('tenant-b'), dns: { enabled: false } })
    const records = await until(
      () => switchRecords(p, 'group-b'),
      (r) => Object.keys(r).length === 0,
    )
    t.same(records, {}, "group-b's switch has no DNS rows")
    t.ok('www' in (await switchRecords(p, 'group-a')), 'group-a keeps its own')
    const dnsRows = async () =>
      (await p.ownedRows()).find((line) => line.startsWith('DNS ')) ?? 'DNS 0'
    t.equal(await dnsRows(), 'DNS 2', "only group-a's two hosts' rows are left in NB")

    for (const host of ['a-web', 'a-web2', 'b-web']) await p.client.deleteHost(host)
    for (const group of ['group-a', 'group-b']) {
      await until(
        () => p.controller.store.hosts.list({ resourceGroup: group }),
        (hosts) => hosts.length === 0,
        30_000,
      )
      await p.client.deleteGroup(group)
    }
    const left = await until(
      () => p.ownedRows(),
      (rows) => rows.length === 0,
      30_000,
    )
    t.same(left, [], 'no Hydrazine row, DNS included, remains in NB')
  })
})

t.test(
  "a group whose DPUs' ovn-controller takes DNS changes incrementally is not held",
  async (t) => {
    const p = await startPipeline(t, { dnsZone: ZONE })
    // OVN 25.03's ovn-controller handles an SB DNS change without recomputing its flows;
    // the agents say which they run in their heartbeats.
    const protocolVersions = [...PROTOCOL_VERSIONS]
    await p.agent('dpu-1', { protocolVersions, ovnVersion: '25.03.0' })
    await p.agent('dpu-3', { protocolVersions, ovnVersion: '25.03.2' })
    await p.client.applyGroup('group-n', groupSpec('tenant-a'))
    await until(
      () => p.controller.store.groups.get('group-n'),
      (g) => g?.status.phase === 'Ready',
    )
    // Back to back: the second host's apply comes well within DNS_BATCH_MS of the first's,
    // which published the group's DNS; no DPU of the group would recompute for it.
    for (const [host, dpu, port, ip] of [
      ['n-one', 'dpu-1', 1, '10.10.10.31'],
      ['n-two', 'dpu-3', 2, '10.10.10.32'],
    ] as const) {
      await p.client.applyHost(host, hostSpec('group-n', dpu, port, { hostIP: ip }))
      const at = await ready(p, host)
      t.equal(at?.status.phase, 'Ready', `${host} Ready`)
      const records = await switchRecords(p, 'group-n')
      t.equal(
        records[`${host}.group-n.hydrazine.test`],
        ip,
        `${host}'s record is in NB by its Ready, not up to ${DNS_BATCH_MS} ms after`,
      )
    }
  },
)

t.test(
  'dnsCostsRecomputes: held unless every DPU of the group reports OVN 25.03 or later',
  async (t) => {
    const versions: Record<string, string | undefined> = {
      old: '23.03.1',
      new: '25.03.0',
      newer: '25.09.1',
      silent: undefined,
    }
    const agents = { ovnVersionOf: async (dpu: string) => versions[dpu] }
    t.equal(await dnsCostsRecomputes(agents, ['new', 'newer', 'new']), false, 'all 25.03 or later')
    t.equal(await dnsCostsRecomputes(agents, ['new', 'old']), true, 'one 23.03 DPU')
    t.equal(await dnsCostsRecomputes(agents, ['new', 'silent']), true, 'one that reports none')
    t.equal(await dnsCostsRecomputes(undefined, ['new']), true, 'no directory of agents')
    const failing = { ovnVersionOf: async () => Promise.reject(new Error('redis down')) }
    t.equal(await dnsCostsRecomputes(failing, ['new']), true, 'a directory that cannot answer')
  },
)

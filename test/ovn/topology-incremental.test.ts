/**
 * An apply through an NbTopologyCache compares only what changed since NB last matched the
 * group's previous compile (`diffTopology`'s `since`). These tests check, against a real
 * NB, that it does so (the apply's `compared`) and that it still leaves NB exactly as a
 * diff of every row wants it, whatever changed in between: members, the group's settings,
 * its policies and relays, and rows changed by hand in NB.
 */
import t, { type Test } from 'tap'
import {
  type ActualRow,
  applyGroupTopology,
  compileGroupTopology,
  Database,
  diffTopology,
  type GroupMember,
  type GroupPolicyRule,
  type GroupTopologySpec,
  type NbTables,
  NbTopologyCache,
  nbSchema,
  OvsdbClient,
  OWNER_KEY,
  ownerOf,
  ROW_KEY,
  readOwnedRows,
  type TOPOLOGY_TABLES,
} from '../../lib/ovn/index.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)
const GROUP = 'inc'
/** A row's key in its group. */
const keyOf = (row: ActualRow) => (row.external_ids as Record<string, string>)[ROW_KEY]
const OWNER = ownerOf(GROUP)

interface Host {
  readonly h: number
  readonly dpu: number
  /** Which of two MACs and two addresses the host has now. */
  readonly variant: 0 | 1
}

const member = ({ h, dpu, variant }: Host): GroupMember => ({
  hostName: `h${h}`,
  logicalPort: `hz-inc-h${h}`,
  mac: `0a:00:00:0${variant}:${(h >> 8).toString(16).padStart(2, '0')}:${(h & 255).toString(16).padStart(2, '0')}`,
  ip: `10.10.${variant * 100 + Math.floor(h / 200)}.${(h % 200) + 2}`,
  dpu: { id: `dpu-${dpu}`, natIp: `172.18.1.${dpu + 1}` },
  access: 'None',
})

interface Shape {
  readonly hosts: readonly Host[]
  readonly dns: boolean
  readonly policy: boolean
  readonly relay: boolean
}

const denyAll: GroupPolicyRule = {
  name: 'deny-in',
  direction: 'ingress',
  action: 'deny',
  protocol: 'tcp',
  ports: { from: 22, to: 22 },
  priority: 100,
}

const spec = ({ hosts, dns, policy, relay }: Shape): GroupTopologySpec => ({
  name: GROUP,
  cidr: '10.10.0.0/16',
  gateway: '10.10.0.1',
  dummyFabricIp: '172.18.0.254/16',
  fabricGatewayIp: '172.18.0.1',
  members: hosts.map(member),
  ...(dns ? { dns: { zone: 'example.test' } } : {}),
  ...(policy ? { policies: [denyAll] } : {}),
  ...(relay
    ? {
        dhcpRelayPorts: [
          {
            dpuId: 'dpu-0',
            portName: 'hz-inc-relay-0',
            mac: '0a:00:00:ff:00:01',
            ip: '10.10.255.250',
          },
        ],
      }
    : {}),
})

/** What a diff of every row, against the rows read afresh, would still write. */
async function leftToWrite(client: OvsdbClient, shape: Shape): Promise<number> {
  const { writes } = diffTopology(
    compileGroupTopology(spec(shape)),
    await readOwnedRows(client, OWNER),
  )
  return writes.length
}

async function start(t: Test) {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  const other = await OvsdbClient.connect(server.unix)
  const cache = await NbTopologyCache.start(client)
  t.teardown(async () => {
    await cache.close()
    await client.close()
    await other.close()
  })
  return { client, other, cache }
}

t.test('an attach to a 200-host group compares its own rows, not the group', async (t) => {
  const { client, cache } = await start(t)
  const hosts = (n: number): Host[] =>
    Array.from({ length: n }, (_, h) => ({ h, dpu: Math.floor(h / 4), variant: 0 }))
  const shape = (n: number): Shape => ({ hosts: hosts(n), dns: false, policy: false, relay: false })

  const first = await applyGroupTopology(client, spec(shape(200)), { cache })
  const rows = compileGroupTopology(spec(shape(200))).rows.length
  t.equal(first.compared, rows, `the group's first apply compares all ${rows} rows`)
  // The next apply looks again at what the first one wrote, once.
  await applyGroupTopology(client, spec(shape(200)), { cache })
  const idle = await applyGroupTopology(client, spec(shape(200)), { cache })
  t.equal(idle.compared, 0, 'nothing changed: nothing compared')
  t.equal(idle.changed, false)

  for (const n of [201, 202, 203, 204, 205]) {
    const attach = await applyGroupTopology(client, spec(shape(n)), { cache })
    t.ok(attach.changed, `host ${n - 1} attached`)
    t.ok(
      attach.compared < 40,
      `attach of host ${n - 1} compared ${attach.compared} rows (of ${rows + 5 * (n - 200)})`,
    )
    t.equal(await leftToWrite(client, shape(n)), 0, 'NB is what a diff of every row wants')
  }
  const detach = await applyGroupTopology(client, spec(shape(150)), { cache })
  t.ok(detach.changed && detach.compared < 40, `50 hosts detached, ${detach.compared} compared`)
  t.equal(await leftToWrite(client, shape(150)), 0, 'NB is what a diff of every row wants')
})

t.test(
  'whatever changes, in the spec or by hand in NB, NB ends as a whole diff wants',
  async (t) => {
    const { client, other, cache } = await start(t)
    // A seeded generator: the same steps on every run.
    let seed = 0x2f6b1d
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed % n
    }
    let shape: Shape = {
      hosts: Array.from({ length: 12 }, (_, h) => ({ h, dpu: h % 4, variant: 0 })),
      dns: false,
      policy: false,
      relay: false,
    }
    let next = 12
    const owned = async (table: (typeof TOPOLOGY_TABLES)[number]): Promise<ActualRow[]> =>
      (await readOwnedRows(client, OWNER))[table] as ActualRow[]
    const pick = <T>(xs: readonly T[]): T | undefined => xs[random(xs.length)]
    const switchUuid = async () =>
      (await owned('Logical_Switch')).find((r) => keyOf(r) === 'ls')?._uuid

    const steps: Record<string, () => Promise<void>> = {
      attach: async () => {
        shape = { ...shape, hosts: [...shape.hosts, { h: next++, dpu: random(6), variant: 0 }] }
      },
      detach: async () => {
        const gone = pick(shape.hosts)
        shape = { ...shape, hosts: shape.hosts.filter((h) => h !== gone) }
      },
      readdress: async () => {
        const host = pick(shape.hosts)
        shape = {
          ...shape,
          hosts: shape.hosts.map((h) =>
            h === host ? { ...h, variant: h.variant === 0 ? 1 : 0 } : h,
          ),
        }
      },
      move: async () => {
        const host = pick(shape.hosts)
        shape = {
          ...shape,
          hosts: shape.hosts.map((h) => (h === host ? { ...h, dpu: (h.dpu + 1) % 6 } : h)),
        }
      },
      dns: async () => {
        shape = { ...shape, dns: !shape.dns }
      },
      policy: async () => {
        shape = { ...shape, policy: !shape.policy }
      },
      relay: async () => {
        shape = { ...shape, relay: !shape.relay }
      },
      'unlink a port by hand': async () => {
        const port = pick((await owned('Logical_Switch_Port')).filter((r) => r.type === ''))
        const ls = await switchUuid()
        if (!port || !ls) return
        await other.transact(nb.name, [
          nb.mutate('Logical_Switch', [['_uuid', '==', ls]], [['ports', 'delete', [port._uuid]]]),
        ])
      },
      'change a port by hand': async () => {
        const port = pick(await owned('Logical_Switch_Port'))
        if (!port) return
        await other.transact(nb.name, [
          nb.update('Logical_Switch_Port', [['_uuid', '==', port._uuid]], {
            addresses: ['0a:00:00:00:99:99 10.10.99.99'],
          }),
        ])
      },
      'drop a reroute by hand': async () => {
        const router = (await owned('Logical_Router')).find((r) => keyOf(r) === 'lr')
        const policy = pick(await owned('Logical_Router_Policy'))
        if (!router || !policy) return
        await other.transact(nb.name, [
          nb.mutate(
            'Logical_Router',
            [['_uuid', '==', router._uuid]],
            [['policies', 'delete', [policy._uuid]]],
          ),
        ])
      },
      'add a stray owned switch by hand': async () => {
        await other.transact(nb.name, [
          nb.insert('Logical_Switch', {
            name: `stray-${next}`,
            external_ids: { [OWNER_KEY]: OWNER, [ROW_KEY]: `ls/stray-${next++}` },
          }),
        ])
      },
    }
    const names = Object.keys(steps)
    let fewer = 0
    const total = 120
    for (let i = 0; i < total; i++) {
      const name = names[random(names.length)] ?? 'attach'
      await steps[name]?.()
      await client.echo() // the cache has seen what the other client wrote
      const result = await applyGroupTopology(client, spec(shape), { cache })
      const all = compileGroupTopology(spec(shape)).rows.length
      if (result.compared < all) fewer++
      const left = await leftToWrite(client, shape)
      if (left !== 0) {
        t.fail(`step ${i} (${name}): ${left} writes left after the apply`)
        return
      }
    }
    t.pass(`${total} steps: NB matched a whole diff after each`)
    t.ok(fewer > total / 2, `${fewer} of ${total} applies compared less than the whole group`)
  },
)

t.test('a switch deleted by hand comes back with the DNS records of unchanged hosts', async (t) => {
  const { client, other, cache } = await start(t)
  const shape: Shape = {
    hosts: Array.from({ length: 5 }, (_, h) => ({ h, dpu: h % 2, variant: 0 })),
    dns: true,
    policy: false,
    relay: false,
  }
  await applyGroupTopology(client, spec(shape), { cache })
  await applyGroupTopology(client, spec(shape), { cache })
  const ls = (await readOwnedRows(client, OWNER)).Logical_Switch.find((r) => keyOf(r) === 'ls')
  t.equal((ls?.dns_records as string[] | undefined)?.length, 5, 'five hosts, five DNS rows')
  await other.transact(nb.name, [nb.delete('Logical_Switch', [['_uuid', '==', ls?._uuid ?? '']])])
  await client.echo()
  const repaired = await applyGroupTopology(client, spec(shape), { cache })
  t.ok(repaired.changed, 'the apply puts the switch back')
  const again = (await readOwnedRows(client, OWNER)).Logical_Switch.find((r) => keyOf(r) === 'ls')
  t.equal((again?.dns_records as string[] | undefined)?.length, 5, 'with its five DNS rows')
  t.equal(await leftToWrite(client, shape), 0, 'NB is what a diff of every row wants')
})

t.test('a row another tool also refers to is still seen held by its parent', async (t) => {
  const { client, other, cache } = await start(t)
  const shape: Shape = {
    hosts: Array.from({ length: 4 }, (_, h) => ({ h, dpu: 0, variant: 0 })),
    dns: false,
    policy: false,
    relay: false,
  }
  await applyGroupTopology(client, spec(shape), { cache })
  // The public switch's fabric guard, an ACL of ours, also listed by a port group of
  // another tool's.
  const acl = (await readOwnedRows(client, OWNER)).ACL[0]
  t.ok(acl, 'the group has an ACL')
  await other.transact(nb.name, [
    nb.insert('Port_Group', { name: 'other_tool', acls: [acl?._uuid ?? ''] } as never),
  ])
  await client.echo()
  // Reconcile's way: compare every row.
  cache.applied.delete(OWNER)
  const whole = await applyGroupTopology(client, spec(shape), { cache })
  t.equal(whole.changed, false, 'comparing every row, nothing to write')
  t.equal(await leftToWrite(client, shape), 0, 'NB is what a diff of every row wants')

  // Our switch drops the ACL (its DPU leaves); the other tool's port group keeps it.
  const moved: Shape = { ...shape, hosts: shape.hosts.map((h) => ({ ...h, dpu: 1 })) }
  await applyGroupTopology(client, spec(moved), { cache })
  cache.applied.delete(OWNER)
  const idle = await applyGroupTopology(client, spec(moved), { cache })
  t.equal(idle.changed, false, 'and after our parent let it go, nothing to write either')
  t.equal(await leftToWrite(client, moved), 0, 'NB is what a diff of every row wants')
})

/**
 * A host moved from one group to another on the same DPU follows its new group's OVN
 * central, and leaves nothing behind in the old one, proven on the lab with the real
 * agent, ovn-controller and per-group centrals: host h is attached to group A on the
 * DPU and reaches A's gateway; it is detached (DELETE, gone; A's gateway no longer
 * answers), then attached again — same MAC, same host port, same name — to group B. Once
 * it is Ready, the real databases say: B's SB binds h's logical port to the DPU's chassis
 * and the DPU's OVS points `ovn-remote` at B's SB; A's SB, which held the DPU's chassis,
 * soon has no `Chassis`, `Chassis_Private` or `Encap` at all (the controller removes them
 * right after it reports Ready), nor a binding of h, and they do not come back; and h
 * reaches B's gateway.
 *
 * Each SB is read through its central's unix socket (`sb.sock` in the central's
 * directory): the same database the status's `ssl:` remote serves, without a chassis
 * certificate (RBAC would show a chassis only its own rows).
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix, run } from '../../infra/lab/dpu.ts'
import type { LabCentral } from '../../infra/lab/hydrazine.ts'
import { type Lab, startLab } from '../../infra/lab/lab.ts'
import { eventually, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** `ovn-sbctl` against `central`'s SB, through its unix socket: to observe only. */
const sbctl = (central: LabCentral, ...args: string[]) =>
  run('ovn-sbctl', [`--db=unix:${join(central.dir, 'sb.sock')}`, '--timeout=10', ...args])

/** The values of one column over a table's rows (`--bare`: one value a line). */
async function column(central: LabCentral, table: string, name: string): Promise<string[]> {
  const out = await sbctl(central, '--bare', `--columns=${name}`, 'list', table)
  return out.split('\n').filter((line) => line.trim() !== '')
}

/** The chassis `central`'s SB knows, by table: what ovn-controller registers there. */
async function chassisRows(central: LabCentral) {
  return {
    Chassis: await column(central, 'Chassis', 'name'),
    Chassis_Private: await column(central, 'Chassis_Private', 'name'),
    Encap: await column(central, 'Encap', 'chassis_name'),
  }
}

/** The name of the chassis `central`'s SB binds `logicalPort` to; '' when bound nowhere. */
async function boundChassis(central: LabCentral, logicalPort: string): Promise<string> {
  const uuid = (
    await sbctl(
      central,
      '--bare',
      '--columns=chassis',
      'find',
      'Port_Binding',
      `logical_port="${logicalPort}"`,
    )
  ).trim()
  if (!uuid) return ''
  return (await sbctl(central, '--bare', '--columns=name', 'list', 'Chassis', uuid)).trim()
}

const groups = {
  'group-a': { tenantId: 'tenant-move', cidr: '10.40.1.0/24', gateway: '10.40.1.1' },
  'group-b': { tenantId: 'tenant-move', cidr: '10.40.2.0/24', gateway: '10.40.2.1' },
} as const

await labTest('a host moved to another group on the same DPU follows its central', async (t) => {
  const began = Date.now()
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 1 })
  const l = lab
  const [dpu] = l.dpus
  if (!dpu) throw new Error('one DPU expected')
  t.comment(`lab up in ${Date.now() - began} ms`)

  for (const [group, { tenantId, cidr, gateway }] of Object.entries(groups)) {
    const answer = await l.api('PUT', `/v1/resource-groups/${group}`, {
      tenantId,
      network: { cidr, gateway },
    })
    t.ok(answer.status < 300, `PUT ${group} → ${answer.status}`)
  }
  t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group A is Ready')
  t.ok(await phaseIs(l, '/v1/resource-groups/group-b', 'Ready'), 'group B is Ready')
  // A group's central starts with its first host (centrals on demand): read once it has one.
  let centralA = undefined as unknown as LabCentral
  let centralB = undefined as unknown as LabCentral

  const h = await l.addHost({ dpu: 1, name: 'h', mac: '0a:00:00:02:00:01' })
  const portA = topologyNames.hostPort('group-a', 'h')
  const portB = topologyNames.hostPort('group-b', 'h')
  const address = (ip: string) => h.exec('ip', 'addr', 'replace', `${ip}/24`, 'dev', 'eth0')
  const ovnRemote = async () =>
    (await dpu.sim.vsctl('get', 'Open_vSwitch', '.', 'external_ids:ovn-remote'))
      .trim()
      .replace(/^"|"$/g, '')

  await t.test('in group A: bound in A, reaching its gateway', async (t) => {
    await address('10.40.1.11')
    const answer = await attachHost(l, h, 'group-a', '10.40.1.11')
    t.ok(answer.status < 300, `attach h to group A → ${answer.status}`)
    t.ok(await hostReady(l, 'h'), 'h is Ready')
    centralA = await l.central('group-a')
    t.equal(await boundChassis(centralA, portA), dpu.id, `A's SB binds ${portA} to ${dpu.id}`)
    t.equal(await ovnRemote(), centralA.sb, "the DPU's ovn-remote is A's SB")
    // What the move must take away again (a Geneve encap: one Encap row).
    t.same(
      await chassisRows(centralA),
      { Chassis: [dpu.id], Chassis_Private: [dpu.id], Encap: [dpu.id] },
      `A's SB holds chassis ${dpu.id}`,
    )
    t.ok(
      await eventually(() => pings(h.netns, groups['group-a'].gateway), 20_000),
      "h → A's gateway",
    )
  })

  await t.test('detached from group A', async (t) => {
    const answer = await l.api('DELETE', '/v1/managed-resources/h')
    t.ok(answer.status < 300, `DELETE h → ${answer.status}`)
    t.ok(await isGone(l, '/v1/managed-resources/h'), 'h is gone')
    t.equal(await boundChassis(centralA, portA), '', `A's SB binds ${portA} nowhere`)
    t.notOk(await pings(h.netns, groups['group-a'].gateway, 1), "h no longer reaches A's gateway")
  })

  await t.test('attached to group B on the same DPU: in B only', async (t) => {
    const moved = Date.now()
    await h.exec('ip', 'addr', 'flush', 'dev', 'eth0')
    await address('10.40.2.11')
    const answer = await attachHost(l, h, 'group-b', '10.40.2.11')
    t.ok(answer.status < 300, `attach h to group B → ${answer.status}`)
    t.ok(await hostReady(l, 'h'), 'h is Ready')
    t.comment(`attached to B and Ready in ${Date.now() - moved} ms`)
    centralB = await l.central('group-b')
    t.not(centralA.sb, centralB.sb, 'two centrals: two SBs')

    t.equal(await boundChassis(centralB, portB), dpu.id, `B's SB binds ${portB} to ${dpu.id}`)
    t.equal(await ovnRemote(), centralB.sb, "the DPU's ovn-remote is B's SB")
    t.same(
      await chassisRows(centralB),
      { Chassis: [dpu.id], Chassis_Private: [dpu.id], Encap: [dpu.id] },
      `B's SB holds chassis ${dpu.id}`,
    )

    const leftInA = async () => ({
      ...(await chassisRows(centralA)),
      Port_Binding: await column(centralA, 'Port_Binding', 'logical_port').then((ports) =>
        ports.filter((p) => p === portA),
      ),
    })
    const nothing = { Chassis: [], Chassis_Private: [], Encap: [], Port_Binding: [] }
    // The controller reports Ready, then removes the chassis from the SB the DPU left.
    let inA = await leftInA()
    const cleared = await eventually(
      async () => {
        inA = await leftInA()
        return inA.Chassis.length + inA.Chassis_Private.length + inA.Encap.length === 0
      },
      10_000,
      100,
    )
    t.ok(cleared, `A's SB loses chassis ${dpu.id}`)
    t.same(inA, nothing, `A's SB: no Chassis, Chassis_Private, Encap at all, no port of h`)
    // ovn-controller re-registering with A a moment later would bring the rows back.
    await sleep(3000)
    t.same(await leftInA(), nothing, 'nor 3 s later')
    t.equal(await ovnRemote(), centralB.sb, "and the DPU's ovn-remote is still B's SB")

    t.ok(
      await eventually(() => pings(h.netns, groups['group-b'].gateway), 20_000),
      "h → B's gateway",
    )
  })
  t.comment(`whole test ${Date.now() - began} ms`)
})

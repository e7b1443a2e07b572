/**
 * Chassis credentials for per-group SBs over TLS, through the controller: a DPU whose
 * last host of a group is detached loses that group's SB while the group's other DPUs are
 * configured with new certificates, and reconcile renews a certificate past half its life.
 * Real Redis, per-group centrals and OVS's TLS client; stand-in agents record each
 * `configure` they are sent.
 */
import { X509Certificate } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { southboundAnswer } from '../helpers/southbound.ts'
import type { Teardown } from '../helpers/stack.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from './fixtures.ts'
import { runReconcile } from './scenarios.ts'

/** What a `configure` carried for the group's SB. */
interface SbCredentials {
  readonly sbCertificate: string
  readonly sbCa: string
}

type Agent = Awaited<ReturnType<Pipeline['agent']>>

/** Every `configure` the agent was sent, its SB credentials, oldest first. */
function credentialsSent(agent: Agent): SbCredentials[] {
  return agent.jobs
    .filter((job) => job.name === 'configure')
    .map((job) => (job.data as { group: SbCredentials }).group)
}

/**
 * dpu-1 and dpu-2 with credentials, host-1 and host-2 on them in group-a, and its SB. With
 * `checkedIsolates`, dpu-2's stand-in shows a port released only once it reached the SB
 * with what the isolate carries, as the real agent does (else the attempt fails,
 * retryably), and not before `checkedIsolates.after`: `attempts` has what the SB answered
 * each attempt.
 */
async function twoDpusInGroupA(
  t: Teardown,
  p: Pipeline,
  checkedIsolates?: { readonly after?: Promise<void> },
) {
  const dir = await tempDir(t)
  for (const id of ['dpu-1', 'dpu-2']) await p.client.applyDpu(id, { fabricIps: dpuFabricIps(id) })
  const one = await dpuWithCredentials(p, dir, 'dpu-1')
  const attempts: string[] = []
  let sb = ''
  const two = await dpuWithCredentials(
    p,
    dir,
    'dpu-2',
    checkedIsolates
      ? {
          isolateAfter: async (job) => {
            await checkedIsolates.after
            const answer = await two.answer(sb, (job.data as { group: SbCredentials }).group)
            attempts.push(answer)
            if (answer !== 'admitted') throw new Error(`cannot check southbound: ${answer}`)
          },
        }
      : {},
  )
  sb = await groupSb(p, 'group-a')
  await p.client.applyHost('host-1', hostSpec('group-a', 'dpu-1', 1))
  await p.client.applyHost('host-2', hostSpec('group-a', 'dpu-2', 2))
  return { one, two, sb, attempts }
}

/** The SB credentials of the first `configure` the agent was sent, once it was. */
async function firstCredentials(agent: Agent): Promise<SbCredentials> {
  const [first] = await until(
    async () => credentialsSent(agent),
    (c) => c.length > 0,
  )
  if (!first) throw new Error('no configure sent')
  return first
}

/**
 * The SB credentials of the last `configure` the agent was sent, once it was sent more
 * than one (or when waiting for that ran out: the first; `why`, the error, when none).
 */
async function laterCredentials(agent: Agent, why: string): Promise<SbCredentials> {
  const sent = await until(
    async () => credentialsSent(agent),
    (c) => c.length > 1,
  )
  const last = sent.at(-1)
  if (!last) throw new Error(why)
  return last
}

/** A DPU with credentials and a stand-in agent, and a way to ask an SB as it. */
async function dpuWithCredentials(
  p: Pipeline,
  dir: string,
  id: string,
  agentOptions: Parameters<Pipeline['agent']>[1] = {},
) {
  const issued = await p.client.issueDpuCredentials(id)
  if (!issued.tls) throw new Error('the pipeline issues certificates')
  const key = join(dir, `${id}.key`)
  await writeFile(key, issued.tls.key, { mode: 0o600 })
  const agent = await p.agent(id, { noSouthbound: true, ...agentOptions })
  let n = 0
  return {
    agent,
    /** How the SB at `sb` answers this DPU presenting `sent`'s certificate, trusting its CA. */
    async answer(sb: string, sent: SbCredentials) {
      n++
      const cert = join(dir, `${id}-${n}.crt`)
      const ca = join(dir, `${id}-${n}-ca.crt`)
      await writeFile(cert, sent.sbCertificate)
      await writeFile(ca, sent.sbCa)
      const answer = await southboundAnswer(sb, { key, cert, ca })
      return answer.state === 'error' ? `error: ${answer.said}` : answer.state
    },
  }
}

async function groupSb(p: Pipeline, name: string): Promise<string> {
  await p.client.applyGroup(name, groupSpec('tenant-a', '10.10.10.0/24', '10.10.10.1'))
  const group = await until(
    () => p.client.getGroup(name),
    (g) => g?.status.phase === 'Ready',
  )
  if (group?.status.phase !== 'Ready') throw new Error(`${name} is not Ready`)
  // Its central runs from its first host on: started here as that host's attach would.
  const sb = (await p.centrals?.ensure(name))?.sb
  if (!sb) throw new Error(`${name} has no SB`)
  return sb
}

async function tempDir(t: Teardown) {
  const dir = await mkdtemp(join(tmpdir(), 'hz-chassis-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

t.test(
  "a DPU whose last host of a group is detached loses the group's SB; the others are configured anew",
  async (t) => {
    const p = await startPipeline(t, { perGroup: true, tls: true })
    const { one, two, sb } = await twoDpusInGroupA(t, p)
    const held1 = await firstCredentials(one.agent)
    const held2 = await firstCredentials(two.agent)
    t.equal(await one.answer(sb, held1), 'admitted', "dpu-1 reads group-a's SB")
    t.equal(await two.answer(sb, held2), 'admitted', "dpu-2 reads group-a's SB")

    await p.client.deleteHost('host-1')
    await until(
      () => p.client.getHost('host-1'),
      (h) => h === undefined,
    )
    const fresh = await laterCredentials(two.agent, 'dpu-2 was sent nothing new')
    t.not(fresh.sbCa, held2.sbCa, "dpu-2 is configured with the group's new CA")
    t.not(fresh.sbCertificate, held2.sbCertificate, 'and a new certificate')
    t.equal(new X509Certificate(fresh.sbCertificate).subject, 'CN=dpu-2', 'for its own name')
    t.equal(await two.answer(sb, fresh), 'admitted', "with them, dpu-2 reads group-a's SB")
    t.equal(await one.answer(sb, held1), 'refused', "dpu-1's certificate no longer opens it")
    t.equal(
      await one.answer(sb, { ...held1, sbCa: fresh.sbCa }),
      'refused',
      "nor trusting the group's new CA",
    )
    t.equal(credentialsSent(one.agent).length, 1, 'dpu-1 was sent nothing for the group')
    const last = two.agent.jobs.filter((job) => job.name === 'configure').at(-1)
    t.match(last?.data, { host: { name: 'host-2' } }, "through host-2's configure")
  },
)

t.test('reconcile renews a chassis certificate past half its life', async (t) => {
  const p = await startPipeline(t, { perGroup: true, tls: true, chassisCertMs: 12_000 })
  const dir = await tempDir(t)
  await p.client.applyDpu('dpu-1', { fabricIps: dpuFabricIps('dpu-1') })
  const one = await dpuWithCredentials(p, dir, 'dpu-1')
  const sb = await groupSb(p, 'group-a')
  await p.client.applyHost('host-1', hostSpec('group-a', 'dpu-1', 1))
  const held = await firstCredentials(one.agent)
  const early = await runReconcile(p, 'reconcile-early')
  t.notOk(early.chassisRenewed, 'a fresh certificate is left alone')

  const halfLife = Date.parse(new X509Certificate(held.sbCertificate).validTo) - 6_000
  await new Promise((r) => setTimeout(r, Math.max(0, halfLife - Date.now()) + 500))
  const report = await runReconcile(p, 'reconcile-late')
  t.same(
    report.chassisRenewed,
    [{ group: 'group-a', dpuId: 'dpu-1', host: 'host-1' }],
    'past half its life: reconcile renews it, through host-1',
  )
  const renewed = await laterCredentials(one.agent, 'nothing renewed')
  t.equal(renewed.sbCa, held.sbCa, 'the same CA: the group keeps its other DPUs as they are')
  t.ok(
    Date.parse(new X509Certificate(renewed.sbCertificate).validTo) >
      Date.parse(new X509Certificate(held.sbCertificate).validTo),
    'a certificate lasting longer reaches the DPU',
  )
  t.equal(await one.answer(sb, renewed), 'admitted', 'and opens the SB')
})

t.test(
  'a DPU serving a Ready host whose chassis certificate ran out is sent a new one by reconcile',
  async (t) => {
    // No reconcile ran while it was valid (the controller was down): nothing renewed it,
    // and the SB refuses it, yet the host stays Ready on the flows its DPU keeps. An
    // upgrade from a version before the chassis CAs leaves the same: none on record.
    const p = await startPipeline(t, { perGroup: true, tls: true, chassisCertMs: 10_000 })
    const dir = await tempDir(t)
    await p.client.applyDpu('dpu-1', { fabricIps: dpuFabricIps('dpu-1') })
    // Its stand-in binds the port in the SB, as ovn-controller would: host-1 gets Ready.
    const one = await dpuWithCredentials(p, dir, 'dpu-1', { noSouthbound: false })
    const sb = await groupSb(p, 'group-a')
    await p.client.applyHost('host-1', hostSpec('group-a', 'dpu-1', 1))
    const held = await firstCredentials(one.agent)
    await until(
      () => p.client.getHost('host-1'),
      (h) => h?.status.phase === 'Ready',
    )
    const ends = Date.parse(new X509Certificate(held.sbCertificate).validTo)
    await new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now()) + 1_500))
    t.equal(await one.answer(sb, held), 'refused', 'run out: the SB refuses it')
    t.equal((await p.client.getHost('host-1'))?.status.phase, 'Ready', 'host-1 is still Ready')

    const report = await runReconcile(p, 'reconcile-expired')
    t.notOk(report.chassisRenewed, 'not a renewal: the certificate is no longer valid')
    t.same(
      report.chassisIssued,
      [{ group: 'group-a', dpuId: 'dpu-1', host: 'host-1' }],
      'reconcile sends dpu-1 a certificate, through host-1',
    )
    const fresh = await laterCredentials(one.agent, 'nothing sent')
    t.equal(fresh.sbCa, held.sbCa, "the group's CA is kept")
    t.equal(await one.answer(sb, fresh), 'admitted', 'the new certificate opens the SB')
    const host = await until(
      () => p.client.getHost('host-1'),
      (h) => h?.status.phase === 'Ready' && (h.status.attempt ?? 1) > 1,
    )
    t.ok(
      host?.status.phase === 'Ready' && (host.status.attempt ?? 1) > 1,
      'host-1 configured again (a new attempt), Ready once its DPU acked',
    )
    const again = await runReconcile(p, 'reconcile-after')
    t.notOk(again.chassisIssued, 'a DPU holding a valid certificate is left alone')
  },
)

/** Two detaches that wait for each other at `points`: each sees the other's host detaching. */
function barriers(...points: string[]) {
  const barrier = () => {
    let arrived = 0
    let open = () => {}
    const opened = new Promise<void>((resolve) => {
      open = resolve
    })
    return {
      arrived: () => arrived,
      async pass() {
        if (++arrived === 2) open()
        await opened
      },
    }
  }
  return new Map(points.map((point) => [point, barrier()]))
}

/** Three DPUs of group-a, with `hosts` (name → DPU), each DPU's first credentials read. */
async function groupOfThree(
  t: Test,
  checkpoint: (point: string) => Promise<void> | undefined,
  hosts: readonly (readonly [string, string])[],
) {
  const p = await startPipeline(t, { perGroup: true, tls: true, checkpoint })
  const dir = await tempDir(t)
  const ids = ['dpu-1', 'dpu-2', 'dpu-3'] as const
  for (const id of ids) await p.client.applyDpu(id, { fabricIps: dpuFabricIps(id) })
  const dpus = new Map<string, Awaited<ReturnType<typeof dpuWithCredentials>>>()
  for (const id of ids) dpus.set(id, await dpuWithCredentials(p, dir, id))
  const dpu = (id: string) => dpus.get(id) as Awaited<ReturnType<typeof dpuWithCredentials>>
  const sb = await groupSb(p, 'group-a')
  for (const [n, [host, id]] of hosts.entries())
    await p.client.applyHost(host, hostSpec('group-a', id, n + 1))
  const held = new Map<string, SbCredentials>()
  for (const id of ids) {
    const first = await firstCredentials(dpu(id).agent)
    held.set(id, first)
    t.equal(await dpu(id).answer(sb, first), 'admitted', `${id} reads group-a's SB`)
  }
  const heldBy = (id: string) => held.get(id) as SbCredentials
  const detached = async (names: readonly string[]) => {
    await Promise.all(names.map((name) => p.client.deleteHost(name)))
    for (const name of names) {
      const gone = await until(
        () => p.client.getHost(name),
        (h) => h === undefined,
      )
      t.equal(gone, undefined, `${name} is detached`)
    }
  }
  return { p, dpu, sb, heldBy, detached }
}

t.test(
  'two DPUs whose last hosts are detached at once: the last detach to finish replaces the CA',
  async (t) => {
    // Both detaches reach the step before their DPU leaves the group's SB, and go on only
    // once both are there; neither removes its host before both have decided: each sees
    // the other's host still being detached, and leaves the replacement to it.
    const waits = barriers('detach:released', 'detach:left-southbound')
    const { p, dpu, sb, heldBy, detached } = await groupOfThree(
      t,
      (point) => waits.get(point)?.pass(),
      [
        ['host-1', 'dpu-1'],
        ['host-2', 'dpu-2'],
        ['host-3', 'dpu-3'],
      ],
    )
    await detached(['host-1', 'host-2'])
    t.equal(waits.get('detach:released')?.arrived(), 2, 'both detaches waited for each other')
    // No reconcile runs: the last detach, its host gone and its DPU left, replaces the CA.
    for (const id of ['dpu-1', 'dpu-2'])
      t.equal(
        await until(
          () => dpu(id).answer(sb, heldBy(id)),
          (answer) => answer === 'refused',
        ),
        'refused',
        `${id}'s certificate no longer opens group-a's SB`,
      )
    // Both detaches may get there at once and each replace it: dpu-3's last credentials.
    const latest = () => credentialsSent(dpu('dpu-3').agent).at(-1)
    const answer = await until(
      async () => {
        const last = latest()
        return last && last.sbCa !== heldBy('dpu-3').sbCa ? dpu('dpu-3').answer(sb, last) : 'old'
      },
      (a) => a === 'admitted',
    )
    t.equal(answer, 'admitted', "dpu-3 is configured with the group's new CA, and reads the SB")
    const report = await runReconcile(p, 'reconcile-leavers')
    t.notOk(report.chassisCaRotated, 'reconcile finds nothing left to replace')
  },
)

t.test(
  'a DPU whose last host is detached beside a host of a DPU that stays: reconcile replaces the CA',
  async (t) => {
    // host-2's detach (dpu-2 keeps host-4) is held until host-1's is over: host-1's sees
    // host-2's under way and leaves the replacement to it, before and after its purge, and
    // host-2's replaces nothing (its DPU stays): reconcile does.
    let release = () => {}
    let held = false
    const { p, dpu, sb, heldBy } = await groupOfThree(
      t,
      (point) => {
        if (point !== 'detach:released' || held) return undefined
        held = true
        return new Promise<void>((resolve) => {
          release = resolve
        })
      },
      [
        ['host-1', 'dpu-1'],
        ['host-2', 'dpu-2'],
        ['host-3', 'dpu-3'],
        ['host-4', 'dpu-2'],
      ],
    )
    const gone = (name: string) =>
      until(
        () => p.client.getHost(name),
        (h) => h === undefined,
      )
    await p.client.deleteHost('host-2')
    await until(
      async () => held,
      (h) => h,
    )
    await p.client.deleteHost('host-1')
    t.equal(await gone('host-1'), undefined, 'host-1 is detached while host-2 is held')
    await new Promise((resolve) => setTimeout(resolve, 1000))
    release()
    t.equal(await gone('host-2'), undefined, 'host-2 is detached')
    // What the race leaves: neither detach replaced the CA.
    t.equal(
      await dpu('dpu-1').answer(sb, heldBy('dpu-1')),
      'admitted',
      "after the detaches, dpu-1's certificate still opens the SB",
    )
    t.equal(credentialsSent(dpu('dpu-3').agent).length, 1, 'and dpu-3 was sent nothing new')

    const report = await runReconcile(p, 'reconcile-leavers')
    t.match(
      report.chassisCaRotated,
      [
        {
          group: 'group-a',
          left: ['dpu-1'],
          sent: [
            { dpuId: 'dpu-2', host: 'host-4' },
            { dpuId: 'dpu-3', host: 'host-3' },
          ],
        },
      ],
      'reconcile finds the CA certifying a DPU serving no host of the group, and replaces it',
    )
    t.equal(
      await dpu('dpu-1').answer(sb, heldBy('dpu-1')),
      'refused',
      "dpu-1's certificate no longer opens group-a's SB",
    )
    const fresh = await laterCredentials(dpu('dpu-3').agent, 'dpu-3 was sent nothing new')
    t.not(fresh.sbCa, heldBy('dpu-3').sbCa, "dpu-3 is configured with the group's new CA")
    t.equal(await dpu('dpu-3').answer(sb, fresh), 'admitted', 'and reads the SB with it')
    const again = await runReconcile(p, 'reconcile-leavers-again')
    t.notOk(again.chassisCaRotated, 'the next run finds nothing to replace')
  },
)

t.test(
  "a host's isolate carries its DPU's certificate from the group's current chassis CA",
  async (t) => {
    // What the SB answered dpu-2 presenting what host-2's isolate carried, asked once the
    // isolate was acked and before dpu-2 left the group.
    let whileServing: Promise<string> | undefined
    let check: (() => Promise<string>) | undefined
    const p = await startPipeline(t, {
      perGroup: true,
      tls: true,
      checkpoint: async (point) => {
        if (point !== 'detach:released' || !check || whileServing) return
        whileServing = check()
        await whileServing
      },
    })
    const { one, two, sb } = await twoDpusInGroupA(t, p)
    const held = await firstCredentials(two.agent)
    await firstCredentials(one.agent)

    // dpu-1 leaves: the group's chassis CA is replaced.
    await p.client.deleteHost('host-1')
    await until(
      () => p.client.getHost('host-1'),
      (h) => h === undefined,
    )
    t.equal(await two.answer(sb, held), 'refused', "dpu-2's first certificate no longer opens it")

    const carriedBy = () => {
      const isolate = two.agent.jobs.find((job) => job.name === 'isolate')
      return (isolate?.data as { group: Partial<SbCredentials> } | undefined)?.group
    }
    check = async () => {
      const { sbCertificate, sbCa } = carriedBy() ?? {}
      if (!sbCertificate || !sbCa) return 'nothing carried'
      return two.answer(sb, { sbCertificate, sbCa })
    }
    await p.client.deleteHost('host-2')
    const gone = await until(
      () => p.client.getHost('host-2'),
      (h) => h === undefined,
    )
    t.equal(gone, undefined, 'host-2 is detached')
    const carried = carriedBy()
    t.ok(carried?.sbCertificate, "host-2's isolate carries a certificate for group-a's SB")
    t.ok(carried?.sbCa, "and the CA of group-a's SB")
    if (carried?.sbCertificate && carried.sbCa) {
      t.equal(new X509Certificate(carried.sbCertificate).subject, 'CN=dpu-2', "dpu-2's own")
      t.not(carried.sbCa, held.sbCa, "from the group's new CA")
      t.equal(
        await whileServing,
        'admitted',
        "with them, dpu-2 read group-a's SB while it served host-2 (to show the port released)",
      )
      t.equal(
        await two.answer(sb, { sbCertificate: carried.sbCertificate, sbCa: carried.sbCa }),
        'refused',
        'once host-2 is gone, dpu-2 left the group: they open nothing',
      )
    }
    const first = one.agent.jobs.find((job) => job.name === 'isolate')
    t.ok(first, "host-1's isolate was sent to dpu-1, before its DPU left")
  },
)

t.test(
  "an isolate sent just before another DPU's leave replaced the group's CA is renewed with the new one",
  async (t) => {
    // host-2's DELETE lands after host-1's detach looked for hosts being detached on other
    // DPUs and before it replaced the CA: host-2's isolate carries the old CA's credentials.
    let leaving: (() => Promise<void>) | undefined
    const p = await startPipeline(t, {
      perGroup: true,
      tls: true,
      checkpoint: async (point, object) => {
        if (point === 'detach:leaving-southbound' && object === 'host-1') await leaving?.()
      },
    })
    let replaced = () => {}
    const caReplaced = new Promise<void>((resolve) => {
      replaced = resolve
    })
    // dpu-2 tries its isolate first once the CA is replaced.
    const { one, two, sb, attempts } = await twoDpusInGroupA(t, p, { after: caReplaced })
    const held = await firstCredentials(two.agent)
    await firstCredentials(one.agent)
    const isolates = () => two.agent.jobs.filter((job) => job.name === 'isolate')
    leaving = async () => {
      leaving = undefined
      await p.client.deleteHost('host-2')
      await until(
        async () => isolates().length,
        (n) => n > 0,
      )
    }

    await p.client.deleteHost('host-1')
    await until(
      () => p.client.getHost('host-1'),
      (h) => h === undefined,
    )
    t.equal(await two.answer(sb, held), 'refused', 'dpu-1 left: the CA dpu-2 held is replaced')
    const [first] = isolates()
    t.equal(
      (first?.data as { group?: SbCredentials } | undefined)?.group?.sbCa,
      held.sbCa,
      "host-2's isolate was sent with the replaced CA",
    )
    replaced()
    const gone = await until(
      () => p.client.getHost('host-2'),
      (h) => h === undefined,
    )
    t.equal(gone, undefined, 'host-2 is detached')
    t.same(attempts, ['refused', 'admitted'], 'its next attempt reached the SB: it was renewed')
    const last = isolates().at(-1)?.data as { group?: SbCredentials } | undefined
    t.not(last?.group?.sbCa, held.sbCa, "with the group's new CA")
  },
)

t.test(
  "an isolate whose credentials were read before another DPU's leave replaced the CA is renewed by its detach",
  async (t) => {
    // host-1's detach has looked for hosts being detached (none) and waits to replace the
    // CA; host-2's detach has read its isolate's credentials and waits to send it. The CA
    // is replaced before the isolate exists: only host-2's detach can renew it.
    const gates = new Map<string, { reached: () => void; open: Promise<void>; go: () => void }>()
    const gate = (key: string) => {
      let reached = () => {}
      let go = () => {}
      const arrived = new Promise<void>((resolve) => {
        reached = resolve
      })
      const open = new Promise<void>((resolve) => {
        go = resolve
      })
      gates.set(key, { reached, open, go })
      return { arrived, go }
    }
    const leaving = gate('detach:leaving-southbound host-1')
    const reading = gate('detach:isolate-credentials host-2')
    const p = await startPipeline(t, {
      perGroup: true,
      tls: true,
      checkpoint: async (point, object) => {
        const g = gates.get(`${point} ${object}`)
        if (!g) return
        gates.delete(`${point} ${object}`)
        g.reached()
        await g.open
      },
    })
    const { one, two, sb, attempts } = await twoDpusInGroupA(t, p, {})
    const held = await firstCredentials(two.agent)
    await firstCredentials(one.agent)

    await p.client.deleteHost('host-1')
    await leaving.arrived
    await p.client.deleteHost('host-2')
    await reading.arrived
    leaving.go()
    await until(
      () => p.client.getHost('host-1'),
      (h) => h === undefined,
    )
    t.equal(await two.answer(sb, held), 'refused', 'the CA dpu-2 held is replaced')
    reading.go()
    const gone = await until(
      () => p.client.getHost('host-2'),
      (h) => h === undefined,
    )
    t.equal(gone, undefined, 'host-2 is detached')
    t.equal(attempts.at(-1), 'admitted', 'its isolate reached the SB')
    const last = two.agent.jobs.filter((job) => job.name === 'isolate').at(-1)
    t.not(
      (last?.data as { group?: SbCredentials } | undefined)?.group?.sbCa,
      held.sbCa,
      "with the group's new CA",
    )
  },
)

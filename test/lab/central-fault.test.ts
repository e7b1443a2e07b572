/**
 * A group's OVN central crashing touches no other group, proven on the lab with real
 * packets: Hydrazine runs one central per resource group (its default), two groups have
 * hosts on DPUs of their own, and group A's NB ovsdb-server is SIGKILLed — found through
 * the pid file in A's central directory — and killed again each time the supervisor
 * restarts it, so that A's central stays down while group B is checked: B's hosts still
 * reach each other, and a host attached to B meanwhile becomes Ready. Once the killing
 * stops, the supervisor's next restart brings A's central back on the same databases and
 * SB port, and group A converges: its hosts Ready, none lost, reaching each other again,
 * and a host attached to A afterwards becomes Ready too.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import type { Test } from 'tap'
import { labPrefix, run } from '../../infra/lab/dpu.ts'
import type { LabCentral } from '../../infra/lab/hydrazine.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { eventually, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** True when `central`'s NB answers a query within 2 s. */
const nbAnswers = (central: LabCentral) =>
  run('ovn-nbctl', [
    `--db=${central.nb}`,
    '--timeout=2',
    '--bare',
    '--columns=name',
    'list',
    'Logical_Switch',
  ]).then(
    () => true,
    () => false,
  )

/** The pid in `central`'s NB pid file, if that process is its NB ovsdb-server and runs. */
async function nbPid(central: LabCentral): Promise<number | undefined> {
  const pid = Number.parseInt(
    await readFile(join(central.dir, 'nb.pid'), 'utf8').catch(() => ''),
    10,
  )
  if (!(pid > 0)) return undefined
  // A pid file outlives a SIGKILLed process, and its number may be reused: check whose it is.
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0')
  return basename(argv[0] ?? '') === 'ovsdb-server' && argv.includes(join(central.dir, 'nb.db'))
    ? pid
    : undefined
}

/**
 * SIGKILLs `central`'s NB ovsdb-server, then every NB the supervisor restarts, until
 * `stop()`: a crash loop that keeps the central down for as long as it runs. `stop()`
 * resolves with the pids it killed.
 */
function crashLoop(central: LabCentral): { killed: readonly number[]; stop(): Promise<number[]> } {
  const killed: number[] = []
  let running = true
  const loop = (async () => {
    while (running) {
      const pid = await nbPid(central)
      if (pid !== undefined && !killed.includes(pid)) {
        try {
          process.kill(pid, 'SIGKILL')
          killed.push(pid)
        } catch {} // gone by itself meanwhile: the next restart's pid comes next
      }
      await sleep(20)
    }
  })()
  return {
    killed,
    async stop() {
      running = false
      await loop
      return killed
    },
  }
}

await labTest("one group's OVN central crashing touches no other group", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-'))
  let lab: Lab | undefined
  let crashing: ReturnType<typeof crashLoop> | undefined
  t.teardown(async () => {
    await crashing?.stop()
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 4 })
  const l = lab

  const attach = async (t: Test, host: LabHost, group: string, ip: string) => {
    const answer = await attachHost(l, host, group, ip)
    t.ok(answer.status < 300, `attach ${host.name} to ${group} → ${answer.status}`)
  }
  const ready = async (t: Test, name: string) => t.ok(await hostReady(l, name), `${name} is Ready`)
  const host = (dpu: number, name: string, mac: string, ip: string) =>
    l.addHost({ dpu, name, mac, ipCidr: `${ip}/24` })

  // Group A on DPU1 and DPU2, group B on DPU3 and DPU4: a DPU serves one group at a time.
  for (const [group, cidr, gateway] of [
    ['group-a', '10.20.1.0/24', '10.20.1.1'],
    ['group-b', '10.20.2.0/24', '10.20.2.1'],
  ] as const) {
    const answer = await l.api('PUT', `/v1/resource-groups/${group}`, {
      tenantId: `tenant-${group}`,
      network: { cidr, gateway },
    })
    t.ok(answer.status < 300, `PUT ${group} → ${answer.status}`)
  }
  t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group A is Ready')
  t.ok(await phaseIs(l, '/v1/resource-groups/group-b', 'Ready'), 'group B is Ready')
  const a1 = await host(1, 'a1', '0a:00:00:01:0a:01', '10.20.1.11')
  const a2 = await host(2, 'a2', '0a:00:00:01:0a:02', '10.20.1.12')
  const b1 = await host(3, 'b1', '0a:00:00:01:0b:01', '10.20.2.11')
  const b2 = await host(4, 'b2', '0a:00:00:01:0b:02', '10.20.2.12')
  await attach(t, a1, 'group-a', '10.20.1.11')
  await attach(t, a2, 'group-a', '10.20.1.12')
  await attach(t, b1, 'group-b', '10.20.2.11')
  await attach(t, b2, 'group-b', '10.20.2.12')
  for (const h of ['a1', 'a2', 'b1', 'b2']) await ready(t, h)
  t.ok(await eventually(() => pings(a1.netns, '10.20.1.12'), 20_000), 'a1 → a2 across DPUs')
  t.ok(await eventually(() => pings(b1.netns, '10.20.2.12'), 20_000), 'b1 → b2 across DPUs')

  const centralA = await l.central('group-a')
  const centralB = await l.central('group-b')
  t.not(centralA.dir, centralB.dir, 'each group has a central of its own')
  const firstPid = await nbPid(centralA)
  t.ok(firstPid, `group A's NB ovsdb-server runs as pid ${firstPid} (${centralA.dir}/nb.pid)`)

  await t.test("while group A's NB is down, group B works", async (t) => {
    const began = Date.now()
    crashing = crashLoop(centralA)
    const loop = crashing
    t.ok(
      await eventually(async () => loop.killed.includes(firstPid ?? 0), 5000, 50),
      `SIGKILLed pid ${firstPid}`,
    )
    t.ok(
      await eventually(async () => !(await nbAnswers(centralA)), 10_000, 100),
      "A's NB answers nothing",
    )
    t.ok(await nbAnswers(centralB), "B's NB answers")

    t.ok(await eventually(() => pings(b1.netns, '10.20.2.12', 3), 10_000), 'b1 → b2')
    t.ok(await pings(b2.netns, '10.20.2.11', 3), 'b2 → b1')
    t.ok(await pings(b1.netns, '10.20.2.1', 2), 'b1 → its gateway')

    // B's control plane too: a host attached now comes up and joins its group.
    const b3 = await host(3, 'b3', '0a:00:00:01:0b:03', '10.20.2.13')
    await attach(t, b3, 'group-b', '10.20.2.13')
    await ready(t, 'b3')
    t.ok(await eventually(() => pings(b3.netns, '10.20.2.12'), 20_000), 'b3 → b2')

    // Its crash-looping NB may answer for a moment between a restart and the next kill.
    t.ok(
      await eventually(async () => !(await nbAnswers(centralA)), 5000, 100),
      "A's NB is still down after all of it",
    )
    const groupA = (await l.api('GET', '/v1/resource-groups/group-a')).body as {
      status?: { phase?: string; conditions?: unknown[] }
    }
    t.comment(`meanwhile group A's status: ${JSON.stringify(groupA.status)}`)
    const killed = await loop.stop()
    crashing = undefined
    t.comment(`group A's NB killed ${killed.length} times over ${Date.now() - began} ms`)
  })

  await t.test("group A's central comes back and its group converges", async (t) => {
    const back = Date.now()
    t.ok(await eventually(() => nbAnswers(centralA), 60_000), "A's NB answers again")
    const pid = await nbPid(centralA)
    t.ok(pid && pid !== firstPid, `restarted by the supervisor as pid ${pid}`)
    t.comment(`A's NB answered ${Date.now() - back} ms after the killing stopped`)
    const again = await l.central('group-a')
    t.same(again, centralA, 'at the same NB and SB: the DPUs stay pointed at it')

    t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group A is Ready')
    const listed = (await l.api('GET', '/v1/managed-resources?resourceGroup=group-a')).body as {
      items?: { name: string }[]
    }
    t.same((listed.items ?? []).map((h) => h.name).sort(), ['a1', 'a2'], 'no host of group A lost')
    await ready(t, 'a1')
    await ready(t, 'a2')
    const ports = await l.nbctl(
      'group-a',
      '--bare',
      '--columns=name',
      'list',
      'Logical_Switch_Port',
    )
    for (const h of ['a1', 'a2'])
      t.match(ports, topologyNames.hostPort('group-a', h), `A's NB still holds ${h}'s port`)
    t.ok(await eventually(() => pings(a1.netns, '10.20.1.12'), 30_000), 'a1 → a2')
    t.ok(await pings(a2.netns, '10.20.1.11'), 'a2 → a1')

    // The controller writes to the restarted central: a host attached now comes up.
    const a3 = await host(2, 'a3', '0a:00:00:01:0a:03', '10.20.1.13')
    await attach(t, a3, 'group-a', '10.20.1.13')
    await ready(t, 'a3')
    t.ok(await eventually(() => pings(a3.netns, '10.20.1.11'), 20_000), 'a3 → a1')
    t.ok(await pings(b1.netns, '10.20.2.12'), 'and group B still reaches its own hosts')
  })
})

import t from 'tap'
import { GroupApplier, type GroupCommitted } from '../../functions/internal/group-apply.ts'
import { FRR_QUEUE, FrrJobName, frrJobId } from '../../lib/jobs/frr.ts'
import { NbPool, SbPool, sharedCentralProvider, topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { northdControl, pacedApplier, readyFabricHost, startPipelineFrr } from './scenarios.ts'

t.test('running a handler again leaves Redis and NB exactly as one run did', async (t) => {
  const p = await startPipeline(t)
  await readyFabricHost(p)
  const snapshot = async () => ({
    nb: await p.nbctl('show'),
    nat: await p.nbctl('lr-nat-list', topologyNames.gatewayRouter('group-a', 'dpu-1')),
    policies: await p.nbctl('lr-policy-list', topologyNames.router('group-a')),
    allocations: await p.controller.ipam.allocations('group-a'),
    map: await p.controller.ipam.map('group-a'),
    phase: (await p.controller.store.hosts.get('host-1'))?.status.phase,
  })
  const once = await snapshot()

  for (const [name, data] of [
    ['group.create', { group: 'group-a', specVersion: 1 }],
    ['host.attach', { host: 'host-1', specVersion: 1 }],
  ] as const) {
    const job = await p.controller.queue.add(name, data, { jobId: `${name}-again` })
    const state = await until(
      async () => {
        const fresh = await p.controller.queue.getJob(job.id ?? '')
        if (fresh?.failedReason) job.failedReason = fresh.failedReason
        return job.getState()
      },
      (s) => s === 'completed' || s === 'failed',
    )
    t.equal(state, 'completed', `${name} ran again ${job.failedReason ?? ''}`)
  }
  t.same(await snapshot(), once, 'no duplicate row, no second address, same status')
})

t.test('PublicAccess: FRR announces PublicIP/32 via the NAT IP; detach withdraws it', async (t) => {
  const p = await startPipeline(t, { frr: true })
  await p.agent('dpu-1')
  const frr = await startPipelineFrr(t, p)

  await p.client.registerPublicIp('203.0.113.7')
  await p.client.applyGroup('group-p', groupSpec())
  await p.client.applyHost(
    'host-p',
    hostSpec('group-p', 'dpu-1', 3, { hostAccess: 'PublicAccess' }),
  )
  const host = await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(host?.status.hostAccessIPs?.publicIP, '203.0.113.7', 'status names the public IP')
  t.same(await p.client.publicIp('203.0.113.7'), {
    ip: '203.0.113.7',
    allocated: true,
    allocatedTo: 'host-p',
  })
  t.equal((await frr.table()).get('203.0.113.7/32'), '172.18.0.111', 'FRR has P/32 via the NAT IP')
  const gateway = topologyNames.gatewayRouter('group-p', 'dpu-1')
  t.same(
    await p.natRules(gateway),
    [
      'dnat 172.18.0.111 10.10.10.2',
      'dnat_and_snat 203.0.113.7 10.10.10.2',
      'snat 172.18.0.111 10.10.10.0/24',
    ],
    'NB: public IP <-> host, NAT IP -> host, subnet SNAT to the NAT IP',
  )

  // Lowering the access releases the public IP: FRR withdraws it, the pool gets it back.
  await p.client.applyHost('host-p', hostSpec('group-p', 'dpu-1', 3, { hostAccess: 'None' }))
  const lowered = await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready' && h.status.observedVersion === 2,
  )
  t.same(lowered?.status.hostAccessIPs, { hostIP: '10.10.10.2' }, 'no fabric or public IP any more')
  t.match(
    (await p.client.events('mr', 'host-p'))
      .map((e) => `${e.reason}: ${e.message}`)
      .reverse()
      .join('\n'),
    /^Created: spec version 1 stored\n[\s\S]*Ready: [\s\S]*SpecChanged: spec version 2 stored\n[\s\S]*Ready: /,
    'creation and the spec change are events, each before the Ready it led to',
  )
  t.equal((await frr.table()).get('203.0.113.7/32'), undefined, 'the prefix was withdrawn')
  t.same(await p.client.publicIp('203.0.113.7'), { ip: '203.0.113.7', allocated: false })
  t.same(await p.natRules(gateway), ['snat 172.18.0.111 10.10.10.0/24'], 'no DNAT left')

  await p.client.applyHost(
    'host-p',
    hostSpec('group-p', 'dpu-1', 3, { hostAccess: 'PublicAccess' }),
  )
  await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready' && h.status.observedVersion === 3,
  )
  t.equal((await frr.table()).get('203.0.113.7/32'), '172.18.0.111', 'announced again')

  await p.client.deleteHost('host-p')
  await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h === undefined,
  )
  t.equal((await frr.table()).get('203.0.113.7/32'), undefined, 'the prefix was withdrawn')
  t.same(await p.client.publicIp('203.0.113.7'), { ip: '203.0.113.7', allocated: false })
})

t.test(
  "a publicip job naming another next hop than the host's DPU cannot move its public IP",
  async (t) => {
    const p = await startPipeline(t, { frr: true })
    await p.agent('dpu-1')
    const frr = await startPipelineFrr(t, p)
    await p.client.registerPublicIp('203.0.113.7')
    await p.client.applyGroup('group-f', groupSpec())
    await p.client.applyHost(
      'host-f',
      hostSpec('group-f', 'dpu-1', 3, { hostAccess: 'PublicAccess' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-f'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal((await frr.table()).get('203.0.113.7/32'), '172.18.0.111', 'announced via its NAT IP')

    // A payload of the earlier contract, naming a next hop of the writer's, at a spec
    // version of its own (its announce is a new FRR job): the address is ignored, the
    // public IP announced via the NAT IP the store gives host-f's DPU.
    await p.controller.queue.add(
      'publicip.allocate',
      { host: 'host-f', specVersion: 7, natIp: '198.51.100.66' },
      { jobId: 'forged-allocate', attempts: 1 },
    )
    const allocate = await until(
      () => p.controller.queue.getJob('forged-allocate'),
      (job) => job?.finishedOn !== undefined,
    )
    t.equal(allocate?.failedReason, undefined, 'the old payload is accepted')
    t.same(
      allocate?.returnvalue,
      { host: 'host-f', publicIp: '203.0.113.7', announced: true },
      'its own public IP, announced',
    )
    const frrQueue = (await p.controller.queues()).find((q) => q.name === FRR_QUEUE)
    const announce = await frrQueue?.getJob(
      frrJobId(FrrJobName.announce, { publicIp: '203.0.113.7', owner: 'host-f', specVersion: 7 }),
    )
    t.equal(announce?.data.nextHop, '172.18.0.111', "FRR was asked for the DPU's NAT IP")
    t.equal(
      (await frr.table()).get('203.0.113.7/32'),
      '172.18.0.111',
      'FRR still announces it via its NAT IP',
    )
    t.same(await p.client.publicIp('203.0.113.7'), {
      ip: '203.0.113.7',
      allocated: true,
      allocatedTo: 'host-f',
    })
  },
)

t.test(
  'applies arriving while one runs share one, started a batch interval after it',
  async (t) => {
    const p = await startPipeline(t)
    await p.client.applyGroup('group-a', groupSpec())
    await until(
      () => p.client.getGroup('group-a'),
      (g) => g?.status.phase === 'Ready',
    )
    const nb = new NbPool()
    t.teardown(() => nb.close())
    const ovn = sharedCentralProvider({ nb: p.nb, sb: p.sb })
    const fabric = { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' }
    const deps = { store: p.controller.store, ipam: p.controller.ipam, ovn, nb, fabric }
    const batchMs = 400
    const groups = new GroupApplier(deps, { batchMs })

    const first = groups.apply('group-a')
    let firstEnded = 0
    void first.then(() => {
      firstEnded = performance.now()
    })
    const queued = Array.from({ length: 20 }, () => groups.apply('group-a'))
    const results = await Promise.all([first, ...queued])
    t.equal(new Set(results.slice(1)).size, 1, '20 callers share one apply')
    t.not(results[1], results[0], 'which is not the one that was running')
    const sharedEnded = performance.now()
    t.ok(
      sharedEnded - firstEnded >= batchMs - 5,
      `it started ${batchMs} ms after the first ended (${Math.round(sharedEnded - firstEnded)} ms)`,
    )

    // Called while the queued apply waits out its interval (none running): it joins it
    // rather than starting a second apply of the group beside it.
    const running = groups.apply('group-a')
    const waiting = groups.apply('group-a')
    await running
    const during = groups.apply('group-a')
    t.equal(await during, await waiting, 'a caller during the interval shares the queued apply')

    const idle = performance.now()
    await groups.apply('group-a')
    t.ok(performance.now() - idle < batchMs, 'with none running, an apply starts at once')
  },
)

t.test('a queued apply goes once ovn-northd has processed the commit before it', async (t) => {
  const p = await startPipeline(t)
  await readyFabricHost(p)
  // Only the test's applier writes the group from here: the pipeline's own jobs (dpu.health
  // every few seconds among them) would put the port deleted by hand back on their own.
  await p.controller.worker.close()
  const northd = northdControl(t, p)
  const southbound = new SbPool()
  t.teardown(() => southbound.close())
  const commits: GroupCommitted[] = []
  const ceilingMs = 1500
  const groups = pacedApplier(t, p, ceilingMs, (c) => commits.push(c))
  const port = topologyNames.hostPort('group-a', 'host-1')

  /**
   * The host's port deleted by hand (and gone from the SB), then put back by one apply, with
   * a second one queued; `paused` pauses northd before the apply.
   */
  const pair = async (paused: boolean) => {
    await p.nbctl('lsp-del', port)
    t.equal(await southbound.settled(p.sb, { added: [], removed: [port] }, 10_000), true)
    if (paused) await northd('pause')
    const first = groups.apply('group-a', { compareAll: true })
    let firstEnded = 0
    void first.then(() => {
      firstEnded = performance.now()
    })
    const queued = groups.apply('group-a')
    const [applied] = await Promise.all([first, queued])
    return { added: applied.result.ports.added, gap: performance.now() - firstEnded }
  }

  const paused = await pair(true)
  t.same(paused.added, [port], 'the first apply put the port back')
  t.ok(
    paused.gap >= ceilingMs - 150,
    `northd paused: the queued apply waited for the ceiling (${Math.round(paused.gap)} ms)`,
  )
  t.match(commits, [{ group: 'group-a', ports: 1, caughtUp: false }], 'and was told so')

  await northd('resume')
  const running = await pair(false)
  t.same(running.added, [port])
  t.ok(
    running.gap < ceilingMs - 200,
    `northd running: the queued apply went once the SB had the port (${Math.round(running.gap)} ms)`,
  )
  t.match(commits[1], { ports: 1, caughtUp: true }, 'northd caught up with that commit')
})

t.test(
  'groups sharing a central are paced together: one commit holds the next of another group',
  async (t) => {
    const p = await startPipeline(t)
    await readyFabricHost(p)
    await p.client.applyGroup('group-b', groupSpec())
    await until(
      () => p.controller.store.groups.get('group-b'),
      (g) => g?.status.phase === 'Ready',
    )
    const northd = northdControl(t, p)
    const southbound = new SbPool()
    t.teardown(() => southbound.close())
    const ceilingMs = 1500
    const groups = pacedApplier(t, p, ceilingMs)
    // Each group applied once: the applier knows their central.
    await groups.apply('group-a')
    await groups.apply('group-b')
    const idle = performance.now()
    await groups.apply('group-b')
    t.ok(performance.now() - idle < 500, 'with nothing paced, group-b applies at once')

    const port = topologyNames.hostPort('group-a', 'host-1')
    await p.nbctl('lsp-del', port)
    t.equal(await southbound.settled(p.sb, { added: [], removed: [port] }, 10_000), true)
    await northd('pause')
    const applied = await groups.apply('group-a', { compareAll: true })
    t.same(applied.result.ports.added, [port], "group-a's commit put its port back")
    const committed = performance.now()
    await groups.apply('group-b')
    const waited = performance.now() - committed
    t.ok(
      waited >= ceilingMs - 200,
      `northd paused: group-b's apply waited for the central's pace (${Math.round(waited)} ms)`,
    )
  },
)

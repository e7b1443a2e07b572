import t from 'tap'
import { ValidationError } from '../../app/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

t.test('group create, host attach on two DPUs, detach, teardown', async (t) => {
  const p = await startPipeline(t)
  const agent1 = await p.agent('dpu-1')
  const agent2 = await p.agent('dpu-2')

  const created = await p.client.applyGroup('group-a', groupSpec())
  t.equal(created.object.specVersion, 1)
  t.ok(created.jobId, 'a job was enqueued')
  const group = await until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g?.status.phase === 'Ready',
  )
  t.equal(group?.status.phase, 'Ready')
  t.equal(group?.status.observedVersion, 1)
  t.same(group?.status.softwareNetworkConfiguration, {
    ovnService: 'shared',
    logicalNetwork: topologyNames.switch('group-a'),
  })

  const again = await p.client.applyGroup('group-a', groupSpec())
  t.equal(again.jobId, undefined, 'an unchanged spec enqueues nothing')

  await p.client.applyHost(
    'host-1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess' }),
  )
  await p.client.applyHost('host-2', hostSpec('group-a', 'dpu-2', 2, { hostIP: '10.10.10.50' }))
  for (const name of ['host-1', 'host-2']) {
    const host = await until(
      () => p.controller.store.hosts.get(name),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(host?.status.phase, 'Ready', `${name} is Ready`)
    t.equal(host?.status.configsSynced, true, `${name} configs are synced`)
    t.equal(host?.status.observedVersion, 1)
  }
  const host1 = await p.controller.store.hosts.get('host-1')
  t.equal(host1?.status.hostAccessIPs?.hostIP, '10.10.10.2', 'first free address of the pool')
  t.equal(host1?.status.hostAccessIPs?.fabricIP, '172.18.0.111', 'the DPU NAT IP')
  t.same(host1?.status.logicalPortReference, {
    logicalPort: topologyNames.hostPort('group-a', 'host-1'),
    dpu: 'dpu-1',
  })
  t.equal(
    (await p.controller.store.hosts.get('host-2'))?.status.hostAccessIPs?.hostIP,
    '10.10.10.50',
  )

  const configure = agent1.jobs.find((j) => j.name === 'configure')
  t.match(configure?.data, {
    protocolVersion: '1.0',
    dpuId: 'dpu-1',
    group: { name: 'group-a', sbRemote: p.sb },
    host: {
      name: 'host-1',
      logicalPort: topologyNames.hostPort('group-a', 'host-1'),
      mac: '52:54:00:00:05:01',
    },
  })
  t.equal(agent2.jobs.length, 1, 'dpu-2 got exactly one job')

  // Each host has its own port, locked to its MAC and address…
  for (const [name, entry] of [
    ['host-1', '52:54:00:00:05:01 10.10.10.2'],
    ['host-2', '52:54:00:00:05:02 10.10.10.50'],
  ] as const) {
    t.same(
      await p.switchPort(topologyNames.hostPort('group-a', name)),
      { addresses: [entry], portSecurity: [entry] },
      `${name}'s port carries addresses and port_security ${entry}`,
    )
  }
  // …and its DPU's gateway router SNATs the subnet to the NAT IP; only the FabricAccess
  // host is reachable from the fabric, through the NAT IP.
  t.same(
    await p.natRules(topologyNames.gatewayRouter('group-a', 'dpu-1')),
    ['dnat_and_snat 172.18.0.111 10.10.10.2', 'snat 172.18.0.111 10.10.10.0/24'],
    'host-1 (FabricAccess): NAT IP <-> host IP on dpu-1',
  )
  t.same(
    await p.natRules(topologyNames.gatewayRouter('group-a', 'dpu-2')),
    ['snat 172.18.0.112 10.10.10.0/24'],
    'host-2 (None): no inbound NAT on dpu-2',
  )

  await p.client.deleteHost('host-2')
  const detached = await until(
    () => p.controller.store.hosts.get('host-2'),
    (h) => h === undefined,
  )
  t.equal(detached, undefined, 'host-2 is gone once isolated')
  t.equal(
    await p.switchPort(topologyNames.hostPort('group-a', 'host-2')),
    undefined,
    'its port left NB',
  )
  t.ok(await p.switchPort(topologyNames.hostPort('group-a', 'host-1')), 'host-1 keeps its port')
  t.ok(
    agent2.jobs.some((j) => j.name === 'isolate'),
    'its agent was asked to isolate it',
  )
  t.equal(
    await p.controller.ipam.lookup('group-a', 'host-2'),
    undefined,
    'its address is back in the pool',
  )

  await p.client.deleteGroup('group-a')
  const gone = await until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g === undefined,
  )
  t.equal(gone, undefined, 'the group is deleted after its hosts are isolated')
  t.ok(
    agent1.jobs.some((j) => j.name === 'isolate'),
    'host-1 was isolated by teardown',
  )
  t.same(await p.ownedRows(), [], 'no Hydrazine row remains in NB')
  t.equal(
    await p.controller.ipam.lookup('group-a', 'host-1'),
    undefined,
    'every address was released',
  )
})

t.test('host.attach configures each DPU in the newest protocol its agent advertises', async (t) => {
  const p = await startPipeline(t)
  const cases = [
    { dpu: 'dpu-old', advertises: ['1.0'], speaks: '1.0' },
    { dpu: 'dpu-new', advertises: ['1.0', '2.0'], speaks: '2.0' },
    { dpu: 'dpu-silent', advertises: undefined, speaks: '1.0' },
  ]
  const agents = await Promise.all(
    cases.map((c) => p.agent(c.dpu, c.advertises ? { protocolVersions: c.advertises } : {})),
  )
  await p.client.applyGroup('group-v', groupSpec())
  for (const [i, c] of cases.entries()) {
    await p.client.applyHost(`host-${c.dpu}`, hostSpec('group-v', c.dpu, i + 1))
  }
  for (const [i, c] of cases.entries()) {
    const host = await until(
      () => p.controller.store.hosts.get(`host-${c.dpu}`),
      (h) => h?.status.phase === 'Ready',
    )
    const label = `agent advertising ${c.advertises?.join(', ') ?? 'nothing'}`
    t.equal(host?.status.phase, 'Ready', `${label}: host Ready`)
    const configure = agents[i]?.jobs.find((j) => j.name === 'configure')
    t.equal(configure?.data.protocolVersion, c.speaks, `${label}: configure in ${c.speaks}`)
  }
})

t.test('an agent that does not answer leaves the host Configuring, naming the DPU', async (t) => {
  const p = await startPipeline(t)
  await p.client.applyGroup('group-b', groupSpec('tenant-b'))
  await p.client.applyHost('host-9', hostSpec('group-b', 'dpu-9', 9))
  const waiting = await until(
    () => p.controller.store.hosts.get('host-9'),
    (h) => h?.status.phase === 'Configuring',
  )
  t.equal(waiting?.status.phase, 'Configuring')
  t.equal(waiting?.status.configsSynced, false)
  const condition = waiting?.status.conditions.find((c) => c.type === 'AgentConfigured')
  t.match(condition, { status: 'False', reason: 'AwaitingAgent', message: /DPU dpu-9/ })

  await p.agent('dpu-9')
  const ready = await until(
    () => p.controller.store.hosts.get('host-9'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(ready?.status.phase, 'Ready', 'the late ack makes it Ready without a new request')
})

t.test('bad requests are refused with every field named and nothing enqueued', async (t) => {
  const p = await startPipeline(t)
  const before = await p.controller.queue.getJobCounts()
  const error = await p.client
    .applyGroup('Group_A', { tenantId: 'x', network: { cidr: '10.0.0.0/33', gateway: 'nope' } })
    .catch((e: unknown) => e)
  t.type(error, ValidationError)
  const hostError = await p.client
    .applyHost('host-1', { resourceGroup: 'g', hostMAC: 'zz', dpu: { id: 'd', ips: [] } })
    .catch((e: unknown) => e)
  t.type(hostError, ValidationError)
  t.match(
    (hostError as ValidationError).issues.map((i) => i.path),
    ['hostMAC', 'dpu.ips'],
  )
  t.same(await p.controller.queue.getJobCounts(), before, 'nothing was enqueued')
  t.same(await p.controller.store.groups.list(), [], 'nothing was stored')

  const job = await p.controller.queue.add('host.attach', { host: 'BAD NAME', specVersion: -1 })
  const failed = await until(
    () => job.getState(),
    (s) => s === 'failed',
  )
  t.equal(failed, 'failed', 'a bad job payload fails at once')
  const reloaded = await p.controller.queue.getJob(job.id ?? '')
  t.equal(reloaded?.attemptsMade, 1, 'and is not retried')
  t.match(reloaded?.failedReason, /invalid host.attach payload: host: must be an RFC 1123 label/)
})

t.test('a group whose network IPAM would refuse is refused before it is stored', async (t) => {
  const p = await startPipeline(t)
  // Extra subnet overlapping the primary network: each valid alone, refused together.
  await t.rejects(
    p.client.applyGroup('group-x', {
      ...groupSpec('tenant-x'),
      extraSubnets: [{ cidr: '10.10.10.0/25' }],
    }),
    {
      code: 'INVALID',
      issues: [{ path: 'extraSubnets.0.cidr', message: 'overlaps 10.10.10.0/24' }],
    },
  )
  t.equal(await p.controller.store.groups.get('group-x'), undefined, 'nothing stored')
})

t.test(
  'a forced detach without the agent: the DPU isolates the host before its next use',
  async (t) => {
    const p = await startPipeline(t)
    await p.agent('dpu-1')
    await p.client.applyGroup('group-f', groupSpec('tenant-f'))
    await p.client.applyHost('host-stay', hostSpec('group-f', 'dpu-1', 3))
    await p.client.applyHost(
      'host-old',
      hostSpec('group-f', 'dpu-7', 1, { identifier: 'pf0vf1', hostAccess: 'FabricAccess' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-old'),
      (h) => h?.status.phase === 'Configuring',
    )
    await until(
      () => p.controller.store.hosts.get('host-stay'),
      (h) => h?.status.phase === 'Ready',
    )
    const oldPort = topologyNames.hostPort('group-f', 'host-old')
    t.ok(await p.switchPort(oldPort), 'the unanswered host has its port in NB')
    t.ok(await p.controller.ipam.lookup('group-f', 'host-old'), 'and an address')
    // The agent is gone; the tenant's host must leave anyway.
    await p.client.deleteHost('host-old', { force: true })
    const purged = await until(
      () => p.controller.store.hosts.get('host-old'),
      (h) => h === undefined,
    )
    t.equal(purged, undefined, 'the host is purged without an ack')
    t.equal(await p.switchPort(oldPort), undefined, 'its port left NB')
    t.same(
      await p.natRules(topologyNames.gatewayRouter('group-f', 'dpu-7')),
      [],
      'no NAT of it remains',
    )
    t.ok(
      await p.switchPort(topologyNames.hostPort('group-f', 'host-stay')),
      'the other host keeps its port',
    )
    t.match(await p.controller.store.dpus.needsIsolation('dpu-7'), [
      {
        host: 'host-old',
        group: 'group-f',
        logicalPort: topologyNames.hostPort('group-f', 'host-old'),
        hostPort: 'pf0vf1',
      },
    ])
    t.equal(
      await p.controller.ipam.lookup('group-f', 'host-old'),
      undefined,
      'its address was released',
    )

    // The DPU comes back and is given to another host: it isolates the old one first.
    const agent = await p.agent('dpu-7')
    await p.client.applyHost('host-new', hostSpec('group-f', 'dpu-7', 2))
    await until(
      () => p.controller.store.hosts.get('host-new'),
      (h) => h?.status.phase === 'Ready',
    )
    t.ok(
      agent.jobs.some((j) => j.name === 'isolate' && j.data.host.name === 'host-old'),
      'the agent was told to isolate the force-detached host',
    )
    t.same(await p.controller.store.dpus.needsIsolation('dpu-7'), [], 'and the DPU is clean again')
  },
)

t.test(
  'a host of the same name attached again in another group: its DPU isolates the old binding first',
  async (t) => {
    const p = await startPipeline(t)
    const { store } = p.controller
    await p.client.applyGroup('group-o', groupSpec('tenant-o'))
    await p.client.applyGroup('group-p', groupSpec('tenant-o', '10.20.0.0/24', '10.20.0.1'))
    for (const group of ['group-o', 'group-p']) {
      await until(
        () => store.groups.get(group),
        (g) => g?.status.phase === 'Ready',
      )
    }
    const phase = (wanted: string | undefined) =>
      until(
        () => store.hosts.get('twin'),
        (h) => h?.status.phase === wanted,
      )
    // dpu-9 has no agent: twin's configure waits, and its forced detach does not.
    await p.client.applyHost('twin', hostSpec('group-o', 'dpu-9', 1))
    await phase('Configuring')
    await p.client.deleteHost('twin', { force: true })
    await phase(undefined)
    const oldPort = topologyNames.hostPort('group-o', 'twin')
    t.match(await store.dpus.needsIsolation('dpu-9'), [
      { host: 'twin', group: 'group-o', logicalPort: oldPort },
    ])

    // dpu-9 comes back, slow to unbind twin's old port; twin is attached again, in group-p.
    let openGate = () => {}
    const gate = new Promise<void>((resolve) => {
      openGate = resolve
    })
    // Open before the agent stops (it waits for the job the gate holds), whatever failed.
    t.teardown(() => openGate())
    let unbound = false
    const agent = await p.agent('dpu-9', {
      isolateAfter: async (job) => {
        if (job.data.host?.logicalPort !== oldPort) return
        await gate
        unbound = true
      },
    })
    const again = await p.client.applyHost('twin', hostSpec('group-p', 'dpu-9', 2))
    const configure = await until(
      async () =>
        agent.jobs.find(
          (j) => j.name === 'configure' && j.data.specVersion === again.object.specVersion,
        ),
      (job) => job !== undefined,
    )
    await until(
      async () => (await configure?.isCompleted()) === true,
      (done) => done,
    )
    t.not(
      (await store.hosts.get('twin'))?.status.phase,
      'Ready',
      'dpu-9 acked the configure in group-p, but twin is not Ready while its port of group-o may be bound',
    )
    const later = setTimeout(openGate, 1500)
    t.teardown(() => clearTimeout(later))
    t.equal((await phase('Ready'))?.spec.resourceGroup, 'group-p', 'twin is Ready in group-p')
    t.ok(unbound, "only once dpu-9 had unbound twin's port of group-o")
    t.ok(
      agent.jobs.some((j) => j.name === 'isolate' && j.data.host.logicalPort === oldPort),
      'the agent was told to isolate it',
    )
    t.same(await store.dpus.needsIsolation('dpu-9'), [], 'and the DPU is clean again')
  },
)

t.test(
  'a forced group delete with a host whose agent never answers leaves nothing behind',
  async (t) => {
    const p = await startPipeline(t)
    await p.client.applyGroup('group-g', groupSpec('tenant-g'))
    await p.client.applyHost(
      'host-lost',
      hostSpec('group-g', 'dpu-8', 1, { identifier: 'pf0vf2', hostAccess: 'FabricAccess' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-lost'),
      (h) => h?.status.phase === 'Configuring',
    )
    const port = topologyNames.hostPort('group-g', 'host-lost')
    t.ok(await p.switchPort(port), 'the unanswered host has its port in NB')
    t.ok(await p.controller.ipam.lookup('group-g', 'host-lost'), 'and an address')

    await p.client.deleteGroup('group-g', { force: true })
    const gone = await until(
      () => p.controller.store.groups.get('group-g'),
      (g) => g === undefined,
    )
    t.equal(gone, undefined, 'the group is purged without an ack')
    t.equal(await p.controller.store.hosts.get('host-lost'), undefined, 'and so is its host')
    t.equal(await p.switchPort(port), undefined, "the host's port left NB")
    t.same(await p.ownedRows(), [], 'no Hydrazine row remains in NB')
    t.equal(await p.controller.ipam.lookup('group-g', 'host-lost'), undefined, 'address released')
    t.same(await p.controller.ipam.allocations('group-g'), [], 'nothing held in the network')
    t.equal(await p.controller.ipam.getNetwork('group-g'), undefined, 'the network is gone')
    t.match(
      await p.controller.store.dpus.needsIsolation('dpu-8'),
      [{ host: 'host-lost', group: 'group-g', logicalPort: port, hostPort: 'pf0vf2' }],
      'its DPU must isolate it before serving another host',
    )
  },
)

t.test(
  'a host or group deleted and created again under the same name converges again',
  async (t) => {
    const p = await startPipeline(t)
    const agent = await p.agent('dpu-1')
    for (const round of [1, 2]) {
      const group = await p.client.applyGroup('group-r', groupSpec())
      await until(
        () => p.controller.store.groups.get('group-r'),
        (g) => g?.status.phase === 'Ready',
      )
      const host = await p.client.applyHost('host-r', hostSpec('group-r', 'dpu-1', 1))
      const ready = await until(
        () => p.controller.store.hosts.get('host-r'),
        (h) => h?.status.phase === 'Ready',
      )
      t.equal(ready?.status.phase, 'Ready', `round ${round}: the host is Ready`)
      t.equal(host.object.specVersion, round, 'versions are never reused for a name')
      t.equal(group.object.specVersion, round)
      await p.client.deleteGroup('group-r')
      await until(
        () => p.controller.store.groups.get('group-r'),
        (g) => g === undefined,
      )
    }
    t.equal(
      agent.jobs.filter((j) => j.name === 'configure').length,
      2,
      'the agent configured it twice',
    )
  },
)

t.test(
  'a spec stored whose job was never queued is queued when its client tries again',
  async (t) => {
    const p = await startPipeline(t)
    await p.agent('dpu-1')
    // Redis goes away after the spec write and before the job's add (the queue's add fails
    // once): the request fails, as its client sees it, with the spec stored.
    const queue = p.controller.queue
    const add = queue.add.bind(queue)
    const failOnce = () => {
      queue.add = (async () => {
        queue.add = add
        throw new Error('Connection is closed.')
      }) as typeof queue.add
    }
    failOnce()
    await t.rejects(p.client.applyGroup('group-a', groupSpec()), /Connection is closed/)
    t.equal((await p.controller.store.groups.get('group-a'))?.status.phase, 'Provisioning')
    const again = await p.client.applyGroup('group-a', groupSpec())
    t.ok(again.jobId, "the client's retry queues the group's create")
    const group = await until(
      () => p.controller.store.groups.get('group-a'),
      (g) => g?.status.phase === 'Ready',
    )
    t.equal(group?.status.phase, 'Ready')

    failOnce()
    await t.rejects(
      p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1)),
      /Connection is closed/,
    )
    t.equal((await p.controller.store.hosts.get('h1'))?.status.phase, 'Attaching', 'stored')
    const retried = await p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1))
    t.ok(retried.jobId, "the client's retry queues the host's attach")
    const host = await until(
      () => p.controller.store.hosts.get('h1'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(host?.status.phase, 'Ready', 'and the host is attached')
    t.equal(
      (await p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1))).jobId,
      undefined,
      'once it is, the same spec again queues nothing',
    )
  },
)

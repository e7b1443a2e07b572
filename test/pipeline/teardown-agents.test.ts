/**
 * Teardown with a silent or refusing DPU agent: a host whose DPU never confirmed its
 * isolation keeps its addresses, its NB rows are gone, and its status says why; the
 * agent's return finishes the detach without any call; a forced delete still works.
 * And waiting for an agent that is not there is quiet.
 */
import { Writable } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import { agentJobId } from '../../lib/agent-protocol/index.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'

const condition = (h: ManagedResource | undefined, type: string) =>
  h?.status.conditions.find((c) => c.type === type)

async function readyHost(p: Pipeline, group: string, host: string, dpu: string, n: number) {
  await p.client.applyGroup(group, groupSpec())
  await p.client.applyHost(host, hostSpec(group, dpu, n, { hostAccess: 'FabricAccess' }))
  await until(
    () => p.controller.store.hosts.get(host),
    (h) => h?.status.phase === 'Ready',
  )
}

t.test('with no agent, the wait is quiet and the status carries it', async (t) => {
  const lines: { level: number; msg: string; err?: string }[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()))
      done()
    },
  })
  const p = await startPipeline(t, { logger: pino({ level: 'debug' }, sink) })
  await p.client.applyGroup('group-q', groupSpec())
  await p.client.applyHost('host-q', hostSpec('group-q', 'dpu-1', 1))
  await until(
    () => p.controller.store.hosts.get('host-q'),
    (h) => h?.status.phase === 'Configuring',
  )
  // The configure the host waits on vanishes (an operator cleaned the agent's queue):
  // the attach adds it again, and keeps waiting.
  const queue = (await p.controller.queues()).find((q) => q.name.endsWith('agent-dpu-1'))
  const id = agentJobId('configure', { dpuId: 'dpu-1', host: { name: 'host-q' }, specVersion: 1 })
  const attachId = 'host.attach-host-q-v1'
  await until(
    () => p.controller.queue.getJobState(attachId),
    (state) => state === 'delayed',
  )
  await (await queue?.getJob(id))?.remove()
  // Woken now (or on its own, if it just woke): it finds its child gone.
  await (await p.controller.queue.getJob(attachId))?.promote().catch(() => {})
  await until(
    async () => [
      await queue?.getJobState(id),
      await p.controller.queue.getJobState('host.attach-host-q-v1'),
    ],
    ([configure, attach]) => configure === 'waiting' && attach === 'delayed',
  )
  t.ok(
    lines.some((l) => l.level === 20 && /vanished/.test(l.err ?? '')),
    'the lost child is logged, at debug',
  )
  t.same(
    lines.filter((l) => l.level >= 40).map((l) => `${l.msg}: ${l.err ?? ''}`),
    [],
    'nothing at warn or above',
  )
  const host = await p.controller.store.hosts.get('host-q')
  t.equal(host?.status.phase, 'Configuring')
  t.match(condition(host, 'AgentConfigured'), {
    status: 'False',
    reason: 'AwaitingAgent',
    message: /waiting for DPU dpu-1/,
  })
})

t.test(
  'a detach whose agent is stopped waits, holding the addresses, and ends when it is back',
  async (t) => {
    const p = await startPipeline(t)
    const agent = await p.agent('dpu-1')
    await readyHost(p, 'group-s', 'host-s', 'dpu-1', 2)
    const held = await p.controller.ipam.lookup('group-s', 'host-s')
    await agent.close()

    await p.client.deleteHost('host-s')
    const port = topologyNames.hostPort('group-s', 'host-s')
    await until(
      () => p.switchPort(port),
      (row) => row === undefined,
    )
    t.pass('its NB rows are gone')
    const waiting = await p.controller.store.hosts.get('host-s')
    t.equal(waiting?.status.phase, 'Detaching', 'it is not shown isolated')
    t.match(condition(waiting, 'Isolated'), {
      status: 'False',
      reason: 'AwaitingAgent',
      message: /waiting for DPU dpu-1 to unbind the host port/,
      lastTransitionTime: /^\d{4}-/,
    })
    t.same(
      (waiting?.status.conditions ?? []).map((c) => c.type).sort(),
      ['AgentConfigured', 'Isolated'],
      'no condition of its attach that the detach makes meaningless',
    )
    t.same(await p.controller.ipam.lookup('group-s', 'host-s'), held, 'it keeps its address')
    t.match(
      (await p.controller.store.events.list('mr', 'host-s')).slice(0, 2),
      [
        { type: 'Warning', reason: 'AwaitingAgent', message: /^Isolated=False/ },
        { reason: 'Detaching', message: /Ready → Detaching/ },
      ],
      'its events say it, newest first',
    )

    await p.agent('dpu-1')
    await until(
      () => p.controller.store.hosts.get('host-s'),
      (h) => h === undefined,
    )
    t.pass('the agent back, the detach finished without any call')
    t.equal(await p.controller.ipam.lookup('group-s', 'host-s'), undefined, 'its address released')
  },
)

t.test(
  'a refusing agent holds the host and its group, saying what to do; force ends it',
  async (t) => {
    const p = await startPipeline(t)
    await p.agent('dpu-2', { refuseIsolate: true })
    await readyHost(p, 'group-r', 'host-r', 'dpu-2', 3)
    const held = await p.controller.ipam.lookup('group-r', 'host-r')

    await p.client.deleteGroup('group-r')
    const host = await until(
      () => p.controller.store.hosts.get('host-r'),
      (h) => condition(h, 'Isolated')?.reason === 'AgentFailed',
    )
    t.equal(host?.status.phase, 'Detaching')
    t.match(
      condition(host, 'Isolated')?.message,
      /DPU dpu-2 could not isolate host host-r: .*busy.*keeps its addresses.*force=true/,
      'names the DPU, the host, why, and the next step',
    )
    t.equal(await p.switchPort(topologyNames.hostPort('group-r', 'host-r')), undefined, 'no NB row')
    t.same(await p.controller.ipam.lookup('group-r', 'host-r'), held, 'its address held')
    const group = await until(
      () => p.controller.store.groups.get('group-r'),
      (g) => condition(g as never, 'Terminating')?.reason === 'HostNotIsolated',
    )
    t.equal(group?.status.phase, 'Terminating')
    t.ok(
      (await p.controller.store.events.list('mr', 'host-r')).some(
        (e) => e.reason === 'AgentFailed',
      ),
      "the refusal is in the host's events",
    )
    t.ok(
      (await p.controller.store.events.list('rg', 'group-r')).some(
        (e) => e.reason === 'HostNotIsolated',
      ),
      "and the wait in the group's",
    )
    t.match(
      group?.status.conditions.find((c) => c.type === 'Terminating')?.message,
      /waits for a host its DPU cannot show isolated \(host\.detach-host-r-v1: .*\).*force=true/,
      'the group names the host it waits for and the next step',
    )

    await p.client.deleteGroup('group-r', { force: true })
    await until(
      () => p.controller.store.groups.get('group-r'),
      (g) => g === undefined,
    )
    t.equal(await p.controller.store.hosts.get('host-r'), undefined, 'a forced delete still works')
  },
)

t.test('a group delete with the agent stopped waits for it the same way', async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-3')
  await readyHost(p, 'group-w', 'host-w', 'dpu-3', 4)
  const held = await p.controller.ipam.lookup('group-w', 'host-w')
  await agent.close()

  await p.client.deleteGroup('group-w')
  const host = await until(
    () => p.controller.store.hosts.get('host-w'),
    (h) => condition(h, 'Isolated')?.reason === 'AwaitingAgent',
  )
  t.equal(host?.status.phase, 'Detaching')
  await until(
    () => p.switchPort(topologyNames.hostPort('group-w', 'host-w')),
    (row) => row === undefined,
  )
  t.same(await p.controller.ipam.lookup('group-w', 'host-w'), held, 'its address held')
  const group = await p.controller.store.groups.get('group-w')
  t.equal(group?.status.phase, 'Terminating', 'the group waits, Terminating')
  t.match(
    group?.status.conditions.find((c) => c.type === 'Terminating'),
    {
      status: 'True',
      reason: 'IsolatingHosts',
    },
  )

  await p.agent('dpu-3')
  await until(
    () => p.controller.store.groups.get('group-w'),
    (g) => g === undefined,
  )
  t.equal(await p.controller.store.hosts.get('host-w'), undefined, 'the agent back, both are gone')
})

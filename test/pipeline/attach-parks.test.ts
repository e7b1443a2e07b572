/**
 * An attach waiting for its group's paced NB commit gives its worker slot back: with two
 * jobs at once, every attach that arrives while the pace holds the next commit rides in
 * that one commit, not two per commit.
 */
import { Registry } from 'prom-client'
import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import { parseScrape, sampleValue } from '../helpers/metrics.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { northdControl } from './scenarios.ts'

/** The group NB commits that added or removed ports so far, as Prometheus reads them. */
async function commits(registry: Registry): Promise<number> {
  const samples = parseScrape(await registry.metrics())
  return sampleValue(samples, 'hydrazine_nb_commit_ports_count') ?? 0
}

const phaseOf = async (p: Pipeline, host: string) =>
  (await p.controller.store.hosts.get(host))?.status.phase

t.test(
  'attaches waiting for a paced commit all ride in it, whatever the worker slots',
  async (t) => {
    const registry = new Registry()
    const p = await startPipeline(t, { metrics: registry, concurrency: 2, parkForCommit: true })
    await p.agent('dpu-1')
    await p.client.applyGroup('group-a', groupSpec())
    await until(
      () => p.controller.store.groups.get('group-a'),
      (g) => g?.status.phase === 'Ready',
    )
    // With ovn-northd paused, a commit holds the group's next one for the pace's ceiling (3 s).
    const northd = northdControl(t, p)
    await northd('pause')
    await p.client.applyHost('host-1', hostSpec('group-a', 'dpu-1', 1))
    await until(
      () => phaseOf(p, 'host-1'),
      (phase) => phase === 'Configuring',
    )
    const before = await commits(registry)

    // Six attaches while host-1's commit holds the next: on two worker slots, each waiting
    // through the pace, they would take three commits of two (9 s); parked, one of six.
    const hosts = ['host-2', 'host-3', 'host-4', 'host-5', 'host-6', 'host-7']
    await Promise.all(
      hosts.map((host, i) => p.client.applyHost(host, hostSpec('group-a', 'dpu-1', i + 2))),
    )
    for (const host of hosts) {
      await until(
        () => phaseOf(p, host),
        (phase) => phase === 'Configuring',
      )
    }
    const ports = (await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port')).split(
      '\n',
    )
    for (const host of hosts) {
      t.ok(ports.includes(topologyNames.hostPort('group-a', host)), `${host}'s port is in NB`)
    }

    await northd('resume')
    for (const host of ['host-1', ...hosts]) {
      await until(
        () => phaseOf(p, host),
        (phase) => phase === 'Ready',
        30_000,
      )
    }
    t.equal(
      (await commits(registry)) - before,
      2,
      "host-1's commit, then one commit of all six (three of two each without parking)",
    )
  },
)

/**
 * `HYDRAZINE_GENEVE_IPSEC` through the pipeline, with real Redis and a real OVN central:
 * the group's central says `NB_Global.ipsec`, every DPU is asked for IPsec in its
 * `configure`, and a host is Ready only once its DPU acks IPsec: one whose agent does not
 * (an agent older than the setting drops the field and acks without it) stays
 * `Configuring`, saying why.
 */
import t from 'tap'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

t.test(
  'HYDRAZINE_GENEVE_IPSEC: every DPU is asked, and a host waits for its DPU to ack',
  async (t) => {
    const p = await startPipeline(t, { geneveIpsec: true })
    const current = await p.agent('dpu-1', {
      tamper: (ack) => ('ovnInstalled' in ack ? { ...ack, geneveIpsec: true } : ack),
    })
    const older = await p.agent('dpu-2')
    await p.client.applyGroup('group-a', groupSpec('tenant-a', '10.10.10.0/24', '10.10.10.1'))
    await until(
      () => p.client.getGroup('group-a'),
      (g) => g?.status.phase === 'Ready',
    )
    t.equal((await p.nbctl('get', 'NB_Global', '.', 'ipsec')).trim(), 'true', 'NB_Global.ipsec')

    await p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1))
    await p.client.applyHost('h2', hostSpec('group-a', 'dpu-2', 2))
    const h1 = await until(
      () => p.client.getHost('h1'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(h1?.status.phase, 'Ready', "h1's DPU acked IPsec: Ready")
    const h2 = await until(
      () => p.client.getHost('h2'),
      (h) =>
        h?.status.conditions.some(
          (c) => c.type === 'AgentConfigured' && c.reason === 'GeneveIpsecNotConfigured',
        ) === true,
    )
    t.equal(h2?.status.phase, 'Configuring', "h2's DPU did not: not Ready")
    t.equal(h2?.status.configsSynced, false)
    t.match(
      h2?.status.conditions.find((c) => c.type === 'AgentConfigured'),
      { status: 'False', message: /DPU dpu-2 was asked for IPsec on its Geneve tunnels/ },
      'saying why',
    )
    for (const [agent, dpu] of [
      [current, 'dpu-1'],
      [older, 'dpu-2'],
    ] as const) {
      const configure = agent.jobs.find((j) => j.name === 'configure')
      t.equal(
        (configure?.data as { group?: { geneveIpsec?: boolean } } | undefined)?.group?.geneveIpsec,
        true,
        `${dpu}'s configure asks for IPsec`,
      )
    }
  },
)

/**
 * `HYDRAZINE_GENEVE_IPSEC` through the pipeline, with real Redis and a real OVN central:
 * the group's central says `NB_Global.ipsec`, every DPU is asked for IPsec in its
 * `configure`, and a host is Ready only once its DPU acks IPsec: one whose agent does not
 * (an agent older than the setting drops the field and acks without it) stays
 * `Configuring`, saying why. A controller started with the setting changed turns the
 * central to it and sends each of its DPUs a `configure` at once.
 */
import t from 'tap'
import { startController } from '../../infra/controller.ts'
import { sharedCentralProvider } from '../../lib/ovn/central.ts'
import { DHCP_SERVER, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

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

t.test('turned on for a running site: each DPU is configured again at once', async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-1', {
    tamper: (ack) => ('ovnInstalled' in ack ? { ...ack, geneveIpsec: true } : ack),
  })
  await p.client.applyGroup('group-a', groupSpec('tenant-a', '10.10.10.0/24', '10.10.10.1'))
  await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.phase === 'Ready',
  )
  await p.client.applyHost('h1', hostSpec('group-a', 'dpu-1', 1))
  await until(
    () => p.client.getHost('h1'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal((await p.nbctl('get', 'NB_Global', '.', 'ipsec')).trim(), 'false', 'off')
  const asked = () =>
    agent.jobs.filter(
      (j) =>
        j.name === 'configure' &&
        (j.data as { group?: { geneveIpsec?: boolean } }).group?.geneveIpsec === true,
    )
  t.equal(asked().length, 0, 'no DPU asked for IPsec')

  // The operator sets HYDRAZINE_GENEVE_IPSEC=true and restarts the controller.
  await p.controller.close()
  const restarted = await startController({
    redisUrl: p.redisUrl,
    ovn: sharedCentralProvider({ nb: p.nb, sb: p.sb }),
    fabric: { dummyIp: '172.18.0.254/24', gateway: '172.18.0.1', physicalNetwork: 'physnet' },
    dhcpServers: [DHCP_SERVER],
    reconcileEveryMs: 0,
    prefix: p.prefix,
    lockDurationMs: 2000,
    geneveIpsec: true,
  })
  t.teardown(() => restarted.close())
  // Anything that opens the central's NB: here another host's attach.
  await restarted.client.applyHost('h2', hostSpec('group-a', 'dpu-1', 2))
  t.ok(
    await until(
      async () => asked().some((j) => (j.data as { host: { name: string } }).host.name === 'h1'),
      (found) => found,
    ),
    "h1's DPU gets a configure asking for IPsec, though h1 did not change",
  )
  t.equal((await p.nbctl('get', 'NB_Global', '.', 'ipsec')).trim(), 'true', 'on')
  const h1 = await until(
    () => restarted.client.getHost('h1'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(h1?.status.phase, 'Ready', 'and h1 is Ready again once the DPU acked it')
})

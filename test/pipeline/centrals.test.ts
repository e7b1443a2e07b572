/**
 * One OVN central per resource group: each group's NB holds only its own rows, a DPU
 * follows one group's SB at a time and leaves no chassis behind, a lost database is
 * rebuilt from Redis, and a deleted group's central goes with it.
 */
import { execFile } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { southboundAnswer } from '../helpers/southbound.ts'
import { startOvsdb } from '../ovn/ovsdb-fixture.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from './fixtures.ts'
import { runReconcile } from './scenarios.ts'
import { heartbeat } from './stand-in-agent.ts'

const run = promisify(execFile)

async function ctl(tool: 'ovn-nbctl' | 'ovn-sbctl', db: string, ...args: string[]) {
  return (await run(tool, [`--db=${db}`, '--timeout=10', ...args])).stdout
}

async function readyGroup(p: Pipeline, name: string, cidr: string, gateway: string) {
  await p.client.applyGroup(name, groupSpec('tenant-a', cidr, gateway))
  return until(
    () => p.client.getGroup(name),
    (g) => g?.status.phase === 'Ready',
  )
}

async function readyHost(p: Pipeline, name: string, group: string, dpu: string, n: number) {
  await p.client.applyHost(name, hostSpec(group, dpu, n))
  return until(
    () => p.client.getHost(name),
    (h) => h?.status.phase === 'Ready',
  )
}

t.test('each group gets its own central, holding only its own rows', async (t) => {
  const p = await startPipeline(t, { perGroup: true })
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  const empty = await readyGroup(p, 'group-a', '10.10.10.0/24', '10.10.10.1')
  await readyGroup(p, 'group-b', '10.10.10.0/24', '10.10.10.1')
  t.equal(empty?.status.ovnCentral, undefined, 'a group without hosts runs no central')

  const hostA = await readyHost(p, 'host-a', 'group-a', 'dpu-1', 1)
  const hostB = await readyHost(p, 'host-b', 'group-b', 'dpu-2', 2)
  t.equal(hostA?.status.phase, 'Ready')
  t.equal(hostB?.status.phase, 'Ready', 'overlapping CIDRs in two centrals')
  const centralA = (await p.client.getGroup('group-a'))?.status.ovnCentral
  const centralB = (await p.client.getGroup('group-b'))?.status.ovnCentral
  t.ok(centralA && centralB, 'each group with hosts says where its central is')
  t.not(centralA?.nb, centralB?.nb, 'two NBs')
  t.not(centralA?.sb, centralB?.sb, 'two SBs')
  t.match(centralA?.sb, /^tcp:127\.0\.0\.1:\d+$/, 'its SB is reachable for DPUs')

  const switchesA = await ctl('ovn-nbctl', centralA?.nb ?? '', 'ls-list')
  const switchesB = await ctl('ovn-nbctl', centralB?.nb ?? '', 'ls-list')
  t.match(switchesA, topologyNames.switch('group-a'))
  t.notMatch(switchesA, topologyNames.switch('group-b'), "A's NB holds nothing of B")
  t.match(switchesB, topologyNames.switch('group-b'))
  t.notMatch(switchesB, topologyNames.switch('group-a'), "B's NB holds nothing of A")

  await t.test('a DPU follows one group at a time, and leaves no chassis behind', async (t) => {
    // dpu-1 serves host-a in group-a: a host of group-b on it waits, saying why.
    await p.client.applyHost('host-b2', hostSpec('group-b', 'dpu-1', 3))
    const waiting = await until(
      () => p.client.getHost('host-b2'),
      (h) => h?.status.conditions.some((c) => c.reason === 'DpuServesAnotherGroup') ?? false,
    )
    t.not(waiting?.status.phase, 'Ready', 'not Ready while the DPU serves group-a')
    const sbA = (await p.centrals?.ensure('group-a'))?.sbController ?? ''
    t.match(await ctl('ovn-sbctl', sbA, '--bare', '--columns=name', 'list', 'Chassis'), /dpu-1/)

    await p.client.deleteHost('host-a')
    await until(
      () => p.client.getHost('host-a'),
      (h) => !h,
    )
    const moved = await until(
      () => p.client.getHost('host-b2'),
      (h) => h?.status.phase === 'Ready',
      60_000,
    )
    t.equal(moved?.status.phase, 'Ready', 'once group-a is gone from the DPU, the host attaches')
    t.notMatch(
      await ctl('ovn-sbctl', sbA, '--bare', '--columns=name', 'list', 'Chassis'),
      /dpu-1/,
      "group-a's SB has no chassis row for dpu-1 any more",
    )
    const sbB = (await p.centrals?.ensure('group-b'))?.sbController ?? ''
    t.match(
      await ctl(
        'ovn-sbctl',
        sbB,
        '--bare',
        '--columns=chassis',
        'find',
        'Port_Binding',
        `logical_port=${topologyNames.hostPort('group-b', 'host-b2')}`,
      ),
      /\S/,
      "the host is bound in group-b's SB",
    )
  })

  await t.test('two groups asking for one free DPU at once: one goes ahead', async (t) => {
    await p.agent('dpu-3')
    await Promise.all([
      p.client.applyHost('race-b', hostSpec('group-b', 'dpu-3', 5)),
      p.client.applyHost('race-a', hostSpec('group-a', 'dpu-3', 4)),
    ])
    const first = await until(
      () => p.client.getHost('race-a'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(first?.status.phase, 'Ready', 'the first by name attaches')
    const second = await p.client.getHost('race-b')
    t.not(second?.status.phase, 'Ready', 'the other waits')
    t.ok(
      second?.status.conditions.some((c) => c.reason === 'DpuServesAnotherGroup'),
      'saying why',
    )
    await p.client.deleteHost('race-a')
    await p.client.deleteHost('race-b')
    await until(
      async () => [await p.client.getHost('race-a'), await p.client.getHost('race-b')],
      (hs) => hs.every((h) => !h),
    )
    // With no host left the DPU may leave the inventory; re-added, it starts afresh.
    await p.client.deleteDpu('dpu-3')
    t.notOk(await p.controller.store.dpus.get('dpu-3'), 'dpu-3 is gone from the inventory')
    t.equal(
      await p.controller.store.dpus.central('dpu-3'),
      null,
      'and with it, the central it followed',
    )
  })

  await t.test("a group's lost NB database is rebuilt from Redis", async (t) => {
    const nb = centralB?.nb ?? ''
    const file = nb.replace(/^unix:/, '').replace('nb.sock', 'nb.db')
    const pid = (await run('cat', [file.replace('nb.db', 'nb.pid')])).stdout.trim()
    await run('rm', ['-f', file])
    await run('kill', ['-9', pid])
    // The central comes back (empty), and reconcile applies the group again (or an
    // apply that ran first did: what counts is that the rows are back).
    const switches = await until(
      async () => {
        await runReconcile(p, `reconcile-${Date.now()}`).catch(() => undefined)
        return ctl('ovn-nbctl', nb, 'ls-list').catch(() => '')
      },
      (out) => out.includes(topologyNames.switch('group-b')),
      60_000,
    )
    t.match(switches, topologyNames.switch('group-b'), "the group's switch is back")
    t.match(
      await ctl('ovn-nbctl', nb, 'lsp-list', topologyNames.switch('group-b')),
      topologyNames.hostPort('group-b', 'host-b'),
      "every host's port is back",
    )
    t.equal((await p.client.getHost('host-b'))?.status.phase, 'Ready', 'no host lost')
  })

  await t.test(
    "deleting a group removes its central; reconcile reports an orphan's and keeps it",
    async (t) => {
      const dir = (centralA?.nb ?? '').replace(/^unix:/, '').replace('/nb.sock', '')
      await p.client.deleteGroup('group-a')
      await until(
        () => p.client.getGroup('group-a'),
        (g) => !g,
      )
      await t.rejects(access(dir), 'its files are gone')
      t.notOk((await p.centrals?.groups())?.includes('group-a'))

      // A central left behind (a delete that crashed after the group was purged).
      await p.centrals?.ensure('ghost')
      const report = await runReconcile(p, 'reconcile-orphans')
      t.same(report.orphanCentrals, ['ghost'], 'reconcile reports a central whose group it lacks')
      t.same(
        (await p.centrals?.groups())?.sort(),
        ['ghost', 'group-b'],
        'and deletes nothing no spec asked it to',
      )
    },
  )
})

t.test('with one shared central too, a DPU serves one group at a time', async (t) => {
  // Its NAT IP is its group's gateway router's: a second group's gateway router on the
  // same DPU would answer ARP for it as well.
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await readyGroup(p, 'group-a', '10.10.10.0/24', '10.10.10.1')
  await readyGroup(p, 'group-b', '10.10.10.0/24', '10.10.10.1')
  t.equal((await readyHost(p, 'host-a', 'group-a', 'dpu-1', 1))?.status.phase, 'Ready')
  await p.client.applyHost('host-b', hostSpec('group-b', 'dpu-1', 2))
  const waiting = await until(
    () => p.client.getHost('host-b'),
    (h) => h?.status.conditions.some((c) => c.reason === 'DpuServesAnotherGroup') ?? false,
  )
  t.not(waiting?.status.phase, 'Ready', 'a host of group-b waits while dpu-1 serves group-a')
  const routers = await p.nbctl('lr-list')
  t.notMatch(
    routers,
    topologyNames.gatewayRouter('group-b', 'dpu-1'),
    'with no gateway router there',
  )
  await p.client.deleteHost('host-a')
  const moved = await until(
    () => p.client.getHost('host-b'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(moved?.status.phase, 'Ready', 'and attaches once group-a left the DPU')
})

t.test(
  "over TLS, a DPU gets a certificate for its group's SB, which only that SB admits",
  async (t) => {
    const p = await startPipeline(t, { perGroup: true, tls: true })
    for (const dpu of ['dpu-1', 'dpu-2']) {
      await p.client.applyDpu(dpu, { fabricIps: dpuFabricIps(dpu) })
    }
    const credentials = await p.client.issueDpuCredentials('dpu-1')
    if (!credentials.tls) throw new Error('the pipeline issues certificates')
    // Stand-ins that bind nothing: the SB admits a chassis only over TLS, under its own name.
    const agent1 = await p.agent('dpu-1', { noSouthbound: true })
    const agent2 = await p.agent('dpu-2', { noSouthbound: true })
    await readyGroup(p, 'group-a', '10.10.10.0/24', '10.10.10.1')
    await readyGroup(p, 'group-b', '10.20.0.0/24', '10.20.0.1')
    await p.client.applyHost('host-a', hostSpec('group-a', 'dpu-1', 1))
    const configure = await until(
      async () => agent1.jobs.find((job) => job.name === 'configure'),
      (job) => job !== undefined,
    )
    // host-a started group-a's central; group-b's runs as its first host would start it.
    const sbA = (await p.client.getGroup('group-a'))?.status.ovnCentral?.sb
    const sbB = (await p.centrals?.ensure('group-b'))?.sb
    t.match(sbA, /^ssl:127\.0\.0\.1:\d+$/, "group-a's SB speaks TLS")
    const sbCertificate: unknown = configure?.data?.group?.sbCertificate
    if (typeof sbCertificate !== 'string') throw new Error('configure carries no sbCertificate')
    const sbCa: unknown = configure?.data?.group?.sbCa
    if (typeof sbCa !== 'string') throw new Error('configure carries no sbCa')
    const cert = new X509Certificate(sbCertificate)
    t.equal(cert.subject, 'CN=dpu-1', 'named for the DPU')
    t.ok(
      cert.publicKey.equals(new X509Certificate(credentials.tls.cert).publicKey),
      "certifying the DPU's own key (its private key never left the credentials answer)",
    )

    const dir = await mkdtemp(join(tmpdir(), 'hz-chassis-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const files = {
      key: join(dir, 'dpu-1.key'),
      identity: join(dir, 'dpu-1.crt'),
      inA: join(dir, 'dpu-1-in-a.crt'),
      ca: join(dir, 'ca.crt'),
      caA: join(dir, 'group-a-ca.crt'),
    }
    await writeFile(files.key, credentials.tls.key, { mode: 0o600 })
    await writeFile(files.identity, credentials.tls.cert)
    await writeFile(files.inA, sbCertificate)
    await writeFile(files.ca, credentials.tls.ca)
    await writeFile(files.caA, sbCa)
    const answer = async (sb: string | undefined, cert: string, ca = files.caA) =>
      (await southboundAnswer(sb ?? '', { key: files.key, cert, ca })).state
    t.equal(await answer(sbA, files.inA), 'admitted', "with it, dpu-1 reads group-a's SB")
    t.equal(
      await answer(sbA, files.inA, files.ca),
      'refused',
      "trusting Hydrazine's CA instead, it takes group-a's SB for no SB of its own: the SB " +
        "presents a certificate of the group's CA",
    )
    t.equal(await answer(sbB, files.inA), 'refused', "group-b's SB refuses it")
    t.equal(
      await answer(sbA, files.identity),
      'refused',
      "the DPU's identity alone opens no group's SB",
    )

    // dpu-2 never had credentials issued: no certificate of it to certify.
    await p.client.applyHost('host-b', hostSpec('group-b', 'dpu-2', 2))
    const failed = await until(
      () => p.client.getHost('host-b'),
      (h) => h?.status.phase === 'Failed',
    )
    t.match(
      failed?.status.conditions.find((c) => c.type === 'AgentConfigured'),
      {
        status: 'False',
        reason: 'ChassisIdentityRefused',
        message: /DPU dpu-2 cannot join the SB of group group-b: no certificate of it is on record/,
      },
      'a DPU without a certificate on record fails its host, saying why',
    )

    // Credentials issued (again): the DPU's hosts are configured again, for the new key.
    const configuresOf = (agent: { jobs: { name: string; data: unknown }[] }) =>
      agent.jobs
        .filter((job) => job.name === 'configure')
        .map((job) => (job.data as { group: { sbCertificate?: string } }).group.sbCertificate)
    const issued2 = await p.client.issueDpuCredentials('dpu-2')
    const retried = await until(
      async () => configuresOf(agent2),
      (certs) => certs.length > 0,
    )
    const for2 = retried[0] ? new X509Certificate(retried[0]) : undefined
    t.ok(
      issued2.tls && for2?.publicKey.equals(new X509Certificate(issued2.tls.cert).publicKey),
      "dpu-2's host is configured with a certificate for its key",
    )
    // What ovn-controller checks of the SB it reaches (OVS's TLS client): a DPU trusting
    // group-a's CA takes neither group-b's SB, which admits the certificate it presents,
    // nor a server presenting another DPU's certificates, for group-a's.
    if (!issued2.tls?.serverCert || !retried[0]) throw new Error('dpu-2 has no certificates')
    const two = {
      key: join(dir, 'dpu-2.key'),
      inB: join(dir, 'dpu-2-in-b.crt'),
      server: join(dir, 'dpu-2-server.crt'),
      caB: join(dir, 'group-b-ca.crt'),
    }
    const caB = (await until(async () => agent2.jobs.find((j) => j.name === 'configure'), Boolean))
      ?.data?.group?.sbCa
    if (typeof caB !== 'string') throw new Error("dpu-2's configure carries no sbCa")
    await writeFile(two.key, issued2.tls.key, { mode: 0o600 })
    await writeFile(two.inB, retried[0])
    await writeFile(two.server, issued2.tls.serverCert)
    await writeFile(two.caB, caB)
    const asTwo = async (sb: string | undefined, ca: string) =>
      (await southboundAnswer(sb ?? '', { key: two.key, cert: two.inB, ca })).state
    t.equal(await asTwo(sbB, two.caB), 'admitted', "trusting group-b's CA: group-b's SB")
    t.equal(await asTwo(sbB, files.caA), 'refused', "trusting group-a's CA: not group-b's SB")
    t.not(sbCa, caB, 'each group its own CA')
    const posing = await startOvsdb(t, '/usr/share/ovn/ovn-sb.ovsschema', {
      ssl: { keyFile: two.key, certFile: two.server, caFile: files.ca },
    })
    t.equal(
      await answer(posing.ssl, files.inA),
      'refused',
      "a DPU's own server certificate cannot pose as group-a's SB",
    )
    t.equal(
      await answer(posing.ssl, files.identity, files.ca),
      'admitted',
      "(which a client trusting Hydrazine's CA would take: what ovn-controller did before)",
    )
    t.not((await p.client.getHost('host-b'))?.status.phase, 'Failed', 'and is no longer Failed')

    const reissued = await p.client.issueDpuCredentials('dpu-1')
    const again = await until(
      async () => configuresOf(agent1),
      (certs) => certs.length > 1,
    )
    const renewed = again.at(-1)
    t.ok(
      reissued.tls &&
        renewed &&
        new X509Certificate(renewed).publicKey.equals(
          new X509Certificate(reissued.tls.cert).publicKey,
        ),
      "dpu-1's new key: its host is configured again with a certificate for it",
    )
  },
)

t.test(
  "with the DPUs' CA: a DPU whose identity is not on record waits for its agent to present one",
  async (t) => {
    // The Kubernetes manifests' case: no credentials are issued here, the operator's CA
    // (the stack's CA stands for it) gave each DPU its certificate.
    const p = await startPipeline(t, { perGroup: true, tls: true, recordIdentities: true })
    if (!p.pki) throw new Error('the pipeline runs a CA')
    await p.client.applyDpu('dpu-1', { fabricIps: dpuFabricIps('dpu-1') })
    const agent = await p.agent('dpu-1', { noSouthbound: true })
    await readyGroup(p, 'group-a', '10.10.10.0/24', '10.10.10.1')
    await p.client.applyHost('host-a', hostSpec('group-a', 'dpu-1', 1))
    const waiting = await until(
      () => p.client.getHost('host-a'),
      (h) => h?.status.conditions.some((c) => c.reason === 'DpuIdentityAwaited') ?? false,
    )
    t.equal(waiting?.status.phase, 'Configuring', 'not Failed: it waits')
    t.match(
      waiting?.status.conditions.find((c) => c.type === 'AgentConfigured'),
      {
        status: 'False',
        message: /DPU dpu-1 waits to join the SB of group group-a: .*its agent presents none/,
      },
      'saying why',
    )
    t.notOk(
      agent.jobs.some((job) => job.name === 'configure'),
      'no configure without a certificate for the SB',
    )

    // The upgraded agent presents its identity in its heartbeat: the attach goes on.
    const { cert } = await p.pki.issueIdentity({ commonName: 'dpu-1', dnsNames: ['dpu-1'] })
    const redis = createRedis({ url: p.agentsRedisUrl })
    t.teardown(() => redis.disconnect())
    await new Heartbeats(redis).write({ ...heartbeat('dpu-1', ['2.0']), identity: cert }, 60_000)
    const configure = await until(
      async () => agent.jobs.find((job) => job.name === 'configure'),
      (job) => job !== undefined,
    )
    const sbCertificate: unknown = configure?.data?.group?.sbCertificate
    t.ok(
      typeof sbCertificate === 'string' &&
        new X509Certificate(sbCertificate).publicKey.equals(new X509Certificate(cert).publicKey),
      "configured with its own key certified for group-a's SB",
    )
  },
)

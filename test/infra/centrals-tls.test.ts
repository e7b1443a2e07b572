/**
 * Per-group OVN centrals over TLS against real ovsdb-server and OVS's TLS client
 * (`ovn-sbctl`): each group's SB admits only the DPUs certified for that group, and
 * presents a server certificate of the group's own CA, which its DPUs trust alone.
 */
import { spawn } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { once } from 'node:events'
import { readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { centralDir, startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { southboundAnswer } from '../helpers/southbound.ts'
import { type Teardown, tempDir } from '../helpers/stack.ts'

/** A provider on `dataDir` (a fresh temp dir by default), closed when the test ends. */
async function centralsIn(
  t: Teardown,
  dataDir?: string,
  extra: { tls?: boolean; chassisCertMs?: number } = {},
) {
  const dir = dataDir ?? (await tempDir(t))
  const pki = await openCertificateAuthority(join(dir, 'pki'))
  const centrals = await startPerGroupCentrals({ dataDir: dir, pki, ...extra })
  t.teardown(() => centrals.close())
  return { centrals, dataDir: dir, pki }
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  )

t.test("TLS: each group's SB admits only the DPUs certified for that group", async (t) => {
  const { centrals, dataDir, pki } = await centralsIn(t, undefined, { tls: true })
  const first = await centrals.ensure('group-a')
  const b = await centrals.ensure('group-b')
  t.match(first.sb, /^ssl:127\.0\.0\.1:\d+$/, 'an ssl: remote')
  const dir = centralDir(dataDir, 'group-a')
  t.ok(await exists(join(dir, 'sb-server.key')), 'its server key lives with the central')

  // dpu-1 serves group-a, dpu-2 group-b: both hold an identity from Hydrazine's CA.
  const identity1 = await pki.issueIdentity({ commonName: 'dpu-1' })
  const identity2 = await pki.issueIdentity({ commonName: 'dpu-2' })
  const files1 = await pki.writeIssued('dpu-1', identity1)
  const files2 = await pki.writeIssued('dpu-2', identity2)
  const inA = await centrals.chassisCertificate('group-a', {
    id: 'dpu-1',
    identity: identity1.cert,
  })
  const inB = await centrals.chassisCertificate('group-b', {
    id: 'dpu-2',
    identity: identity2.cert,
  })
  if (!inA || !inB) throw new Error('a TLS central certifies its chassis')
  const inAFile = join(dataDir, 'dpu-1-in-a.crt')
  const inBFile = join(dataDir, 'dpu-2-in-b.crt')
  await writeFile(inAFile, inA)
  await writeFile(inBFile, inB)
  t.equal(
    await centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: identity1.cert }),
    inA,
    'asked again: the same certificate (the agent has no reason to reconnect)',
  )

  // Each DPU trusts its own group's CA for its SB, as `configure` hands it over.
  const caOf = async (group: string) => {
    const pem = await centrals.southboundCa(group)
    if (!pem) throw new Error(`${group}'s SB has no CA of its own`)
    const file = join(dataDir, `${group}-ca.crt`)
    await writeFile(file, pem)
    return file
  }
  const [caA, caB] = [await caOf('group-a'), await caOf('group-b')]
  const trusted: Record<string, string> = { [first.sb]: caA, [b.sb]: caB }
  const answer = async (sb: string, key: string, cert: string, ca = trusted[sb] ?? '') =>
    (await southboundAnswer(sb, { key, cert, ca })).state
  t.equal(
    await answer(first.sb, files1.keyFile, inAFile),
    'admitted',
    "dpu-1 with its group-a certificate reads group-a's SB",
  )
  t.equal(
    await answer(b.sb, files2.keyFile, inBFile),
    'admitted',
    "dpu-2 with its group-b certificate reads group-b's SB",
  )
  t.equal(
    await answer(first.sb, files1.keyFile, files1.certFile),
    'refused',
    "a DPU's identity alone opens no group's SB",
  )
  t.equal(
    await answer(first.sb, files2.keyFile, inBFile),
    'refused',
    "group-b's DPU, with its group-b certificate, cannot reach group-a's SB",
  )
  const client = await pki.writeIssued('other', await pki.issueClient({ commonName: 'other' }))
  t.equal(
    await answer(first.sb, client.keyFile, client.certFile),
    'refused',
    "nor can any other client certificate of Hydrazine's CA",
  )
  t.equal(
    await answer(b.sb, files2.keyFile, inBFile, caA),
    'refused',
    "a DPU of group-a takes group-b's SB for none of its own (its server certificate is group-b's)",
  )
  t.equal(
    await answer(first.sb, files1.keyFile, inAFile, pki.caFile),
    'refused',
    "nor trusting Hydrazine's CA: no SB of a group presents one of its certificates",
  )

  await t.rejects(
    centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: null }),
    { code: 'CHASSIS_IDENTITY_REFUSED', message: /no certificate of it is on record/ },
    'no identity on record: refused, naming why',
  )
  await t.rejects(
    centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: identity2.cert }),
    { code: 'CHASSIS_IDENTITY_REFUSED', message: /names CN=dpu-2/ },
    "another DPU's identity is not certified as this one",
  )
  // An identity that ends within a month: its certificate ends with it, and is kept.
  const shortLived = await pki.issueIdentity({ commonName: 'dpu-3', days: 10 })
  const ask3 = () =>
    centrals.chassisCertificate('group-a', { id: 'dpu-3', identity: shortLived.cert })
  const in3 = await ask3()
  t.ok(
    in3 &&
      Date.parse(new X509Certificate(in3).validTo) <=
        Date.parse(new X509Certificate(shortLived.cert).validTo),
    "a chassis certificate never outlives the DPU's identity",
  )
  t.equal(await ask3(), in3, 'and is not issued anew on every configure')

  const stranger = await openCertificateAuthority(join(dataDir, 'stranger'))
  const forged = await stranger.issueIdentity({ commonName: 'dpu-1' })
  await t.rejects(
    centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: forged.cert }),
    { code: 'CHASSIS_IDENTITY_REFUSED', message: /not a valid one of the DPUs' CA/ },
    'an identity from another CA is refused',
  )

  await centrals.close()
  const again = await centralsIn(t, dataDir, { tls: true })
  const second = await again.centrals.ensure('group-a')
  t.equal(second.sb, first.sb, 'the same ssl: remote after a restart')
  t.equal(
    await again.centrals.southboundCa('group-a'),
    await readFile(caA, 'utf8'),
    'and the same CA for its server',
  )
  t.equal(
    await answer(second.sb, files1.keyFile, inAFile),
    'admitted',
    "and the same chassis CA: dpu-1's certificate still opens it",
  )
  await again.centrals.release('group-a')
  t.notOk(await exists(join(dir, 'chassis-ca')), "released, the group's chassis CA is gone")
})

t.test(
  "upgrading: a group's SB that presented a certificate of Hydrazine's CA keeps doing so",
  async (t) => {
    // An earlier version's central: its SB server certificate from Hydrazine's CA, which
    // its DPUs' ovn-controllers trust (their configure named no CA of the group).
    const { centrals, dataDir, pki } = await centralsIn(t, undefined, { tls: true })
    const dir = centralDir(dataDir, 'group-a')
    await centrals.ensure('group-a')
    await centrals.close()
    await writeFile(
      join(dir, 'sb-server.crt'),
      (await pki.issueServer({ ips: ['127.0.0.1'] })).cert,
    )

    const again = await centralsIn(t, dataDir, { tls: true })
    const { sb } = await again.centrals.ensure('group-a')
    t.equal(await again.centrals.southboundCa('group-a'), undefined, 'no CA of its own to name')
    const identity = await pki.issueIdentity({ commonName: 'dpu-1' })
    const files = await pki.writeIssued('dpu-1', identity)
    const inA = await again.centrals.chassisCertificate('group-a', {
      id: 'dpu-1',
      identity: identity.cert,
    })
    const inAFile = join(dataDir, 'dpu-1-in-a.crt')
    await writeFile(inAFile, inA ?? '')
    const asDpu = { key: files.keyFile, cert: inAFile, ca: pki.caFile }
    t.equal((await southboundAnswer(sb, asDpu)).state, 'admitted', 'its DPUs keep their SB')
    t.ok(
      pki.issued(await readFile(join(dir, 'sb-server.crt'), 'utf8')),
      "its server certificate still of Hydrazine's CA",
    )
    // A group that is new gets a CA of its own for its SB.
    t.ok(await again.centrals.southboundCa('group-b'), 'a new group: its own')
  },
)

t.test('plaintext centrals certify nothing: the identity is enough', async (t) => {
  const { centrals, pki } = await centralsIn(t)
  await centrals.ensure('group-a')
  const identity = await pki.issueIdentity({ commonName: 'dpu-1' })
  t.equal(
    await centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: identity.cert }),
    undefined,
  )
  t.equal(await centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: null }), undefined)
  t.equal(
    await centrals.leaveChassis('group-a', 'dpu-1'),
    false,
    'a DPU leaving changes nothing there (no DPU needs new credentials)',
  )
})

/**
 * A client holding a session open on an SB, as a DPU's ovn-controller does:
 * `ovsdb-client monitor`, which exits when the SB drops its session.
 */
async function openSession(
  t: Teardown,
  sb: string,
  files: { key: string; cert: string; ca: string },
) {
  const child = spawn(
    'ovsdb-client',
    [
      `--private-key=${files.key}`,
      `--certificate=${files.cert}`,
      `--ca-cert=${files.ca}`,
      'monitor',
      sb,
      'OVN_Southbound',
      'SB_Global',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  const closed = once(child, 'exit').then(() => true)
  t.teardown(() => {
    if (child.exitCode === null) child.kill()
  })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  // Open once the SB answered its first monitor reply (the rows it holds, `initial`).
  const deadline = Date.now() + 5000
  while (!/ initial /.test(out) && child.exitCode === null && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50))
  return {
    open: child.exitCode === null && / initial /.test(out),
    closedWithin: (ms: number) =>
      Promise.race([closed, new Promise<boolean>((r) => setTimeout(() => r(false), ms))]),
  }
}

t.test(
  "a DPU that leaves a group loses that group's SB; the others get new certificates",
  async (t) => {
    const { centrals, dataDir, pki } = await centralsIn(t, undefined, { tls: true })
    const { sb } = await centrals.ensure('group-a')
    const dpu = async (id: string) => {
      const identity = await pki.issueIdentity({ commonName: id })
      const files = await pki.writeIssued(id, identity)
      const certify = async (name: string) => {
        const pem = await centrals.chassisCertificate('group-a', { id, identity: identity.cert })
        const file = join(dataDir, `${id}-${name}.crt`)
        await writeFile(file, pem ?? '')
        return { pem, file }
      }
      return { id, files, certify }
    }
    const caFile = async (name: string) => {
      const file = join(dataDir, `group-a-${name}-ca.crt`)
      await writeFile(file, (await centrals.southboundCa('group-a')) ?? '')
      return file
    }
    const leaver = await dpu('dpu-1')
    const stayer = await dpu('dpu-2')
    const before = {
      leaver: await leaver.certify('before'),
      stayer: await stayer.certify('before'),
    }
    const caBefore = await caFile('before')
    const as = (d: typeof leaver, cert: string, ca: string) => ({ key: d.files.keyFile, cert, ca })
    const session = await openSession(t, sb, as(leaver, before.leaver.file, caBefore))
    t.ok(session.open, "dpu-1 holds a session open on group-a's SB")
    t.equal(
      (await southboundAnswer(sb, as(stayer, before.stayer.file, caBefore))).state,
      'admitted',
    )

    t.equal(
      await centrals.leaveChassis('group-a', 'dpu-1'),
      true,
      'the group has DPUs to certify anew',
    )

    t.ok(await session.closedWithin(5000), "dpu-1's open session is closed")
    const caAfter = await caFile('after')
    t.not(
      await readFile(caAfter, 'utf8'),
      await readFile(caBefore, 'utf8'),
      'the group has a new CA',
    )
    for (const ca of [caBefore, caAfter]) {
      t.equal(
        (await southboundAnswer(sb, as(leaver, before.leaver.file, ca))).state,
        'refused',
        "dpu-1's certificate no longer opens group-a's SB",
      )
    }
    t.equal(
      (await southboundAnswer(sb, as(stayer, before.stayer.file, caAfter))).state,
      'refused',
      "dpu-2's old certificate neither: it was signed by the replaced CA",
    )
    const after = await stayer.certify('after')
    t.not(after.pem, before.stayer.pem, 'dpu-2 is certified anew')
    t.equal(
      (await southboundAnswer(sb, as(stayer, after.file, caAfter))).state,
      'admitted',
      "with its new certificate and the group's new CA, dpu-2 reads group-a's SB",
    )
    t.equal(
      (await southboundAnswer(sb, as(stayer, after.file, caBefore))).state,
      'refused',
      'the SB presents a server certificate of the new CA (the old one no longer vouches for it)',
    )

    // The rotation outlives a restart: the new CA is the one on disk.
    await centrals.close()
    const again = await centralsIn(t, dataDir, { tls: true })
    const second = await again.centrals.ensure('group-a')
    t.equal((await southboundAnswer(second.sb, as(stayer, after.file, caAfter))).state, 'admitted')
    t.equal(
      (await southboundAnswer(second.sb, as(leaver, before.leaver.file, caBefore))).state,
      'refused',
      'restarted, the leaver is still refused',
    )
  },
)

t.test(
  'a chassis certificate past half its life is due, and its renewal opens the SB',
  async (t) => {
    const { centrals, dataDir, pki } = await centralsIn(t, undefined, {
      tls: true,
      chassisCertMs: 12_000,
    })
    const { sb } = await centrals.ensure('group-a')
    const identity = await pki.issueIdentity({ commonName: 'dpu-1' })
    const files = await pki.writeIssued('dpu-1', identity)
    const certify = () =>
      centrals.chassisCertificate('group-a', { id: 'dpu-1', identity: identity.cert })
    const first = (await certify()) ?? ''
    const life = Date.parse(new X509Certificate(first).validTo) - Date.now()
    t.ok(life > 5_000 && life <= 12_000, `valid for the setting, 12 s (${life} ms left)`)
    t.same(await centrals.chassisRenewalsDue(), [], 'fresh: not due')
    t.equal(await certify(), first, 'and kept')

    await new Promise((r) => setTimeout(r, 6_500))
    t.same(
      await centrals.chassisRenewalsDue(),
      [{ group: 'group-a', dpuId: 'dpu-1' }],
      'past half its life: due for renewal',
    )
    const renewed = (await certify()) ?? ''
    t.not(renewed, first, 'asked again: a new one')
    t.ok(
      Date.parse(new X509Certificate(renewed).validTo) >
        Date.parse(new X509Certificate(first).validTo),
      'lasting longer',
    )
    t.same(await centrals.chassisRenewalsDue(), [], 'no longer due')
    const file = join(dataDir, 'renewed.crt')
    const ca = join(dataDir, 'ca.crt')
    await writeFile(file, renewed)
    await writeFile(ca, (await centrals.southboundCa('group-a')) ?? '')
    t.equal(
      (await southboundAnswer(sb, { key: files.keyFile, cert: file, ca })).state,
      'admitted',
      'the renewed certificate opens the SB (the same CA: no other DPU is touched)',
    )
  },
)

t.test(
  'upgrading: chassis certificates an earlier version issued for a year keep their DPUs connected, and are renewed short',
  async (t) => {
    const { centrals, dataDir, pki } = await centralsIn(t, undefined, { tls: true })
    await centrals.ensure('group-a')
    const identity = await pki.issueIdentity({ commonName: 'dpu-1' })
    const files = await pki.writeIssued('dpu-1', identity)
    const ca = join(dataDir, 'ca.crt')
    await writeFile(ca, (await centrals.southboundCa('group-a')) ?? '')
    await centrals.close()
    // What the earlier version left: the group's chassis CA, and dpu-1's certificate from
    // it for a year, which dpu-1's ovn-controller presents.
    const chassisCa = await openCertificateAuthority(
      join(centralDir(dataDir, 'group-a'), 'chassis-ca'),
    )
    const yearLong = await chassisCa.certifyKeyOf(identity.cert, 365)
    await writeFile(join(chassisCa.dir, 'chassis-dpu-1.crt'), yearLong)
    const yearFile = join(dataDir, 'year.crt')
    await writeFile(yearFile, yearLong)

    const again = await centralsIn(t, dataDir, { tls: true })
    const { sb } = await again.centrals.ensure('group-a')
    const session = await openSession(t, sb, { key: files.keyFile, cert: yearFile, ca })
    t.ok(session.open, 'after the upgrade, dpu-1 reconnects with the certificate it holds')
    t.same(
      await again.centrals.chassisRenewalsDue(),
      [{ group: 'group-a', dpuId: 'dpu-1' }],
      'a certificate longer than the setting allows is due at once',
    )
    const renewed =
      (await again.centrals.chassisCertificate('group-a', {
        id: 'dpu-1',
        identity: identity.cert,
      })) ?? ''
    t.ok(
      Date.parse(new X509Certificate(renewed).validTo) - Date.now() <= 24 * 60 * 60 * 1000,
      'its renewal lasts a day',
    )
    t.notOk(await session.closedWithin(1500), 'and the renewal closes no session')
    const renewedFile = join(dataDir, 'renewed.crt')
    await writeFile(renewedFile, renewed)
    t.equal(
      (await southboundAnswer(sb, { key: files.keyFile, cert: renewedFile, ca })).state,
      'admitted',
      'the renewed certificate opens the SB',
    )
  },
)

t.test(
  'the DPUs the chassis CA certified are listed, and a central that does not run has its CA replaced without starting',
  async (t) => {
    const { centrals, dataDir, pki } = await centralsIn(t, undefined, { tls: true })
    await centrals.ensure('group-a')
    const dpu = async (id: string) => {
      const identity = await pki.issueIdentity({ commonName: id })
      const files = await pki.writeIssued(id, identity)
      const pem = await centrals.chassisCertificate('group-a', { id, identity: identity.cert })
      const file = join(dataDir, `${id}-in-a.crt`)
      await writeFile(file, pem ?? '')
      return { key: files.keyFile, cert: file }
    }
    const one = await dpu('dpu-1')
    const two = await dpu('dpu-2')
    t.same(
      await centrals.chassisCertified(),
      [{ group: 'group-a', dpuIds: ['dpu-1', 'dpu-2'] }],
      'both DPUs certified by the current CA',
    )
    const ca = join(dataDir, 'group-a-ca.crt')
    await writeFile(ca, (await centrals.southboundCa('group-a')) ?? '')

    // The group's hosts are gone: its central stops, its CA kept for the next start.
    await centrals.stop('group-a')
    t.same(
      await centrals.chassisCertified(),
      [{ group: 'group-a', dpuIds: ['dpu-1', 'dpu-2'] }],
      'read from disk while the central does not run',
    )
    t.equal(await centrals.leaveChassis('group-a', ['dpu-1', 'dpu-2']), true, 'both leave')
    t.same(await centrals.list(), [], 'nothing was started for it')
    t.same(
      await centrals.chassisCertified(),
      [{ group: 'group-a', dpuIds: [] }],
      'the new CA certified no one',
    )

    const { sb } = await centrals.ensure('group-a')
    const caAfter = join(dataDir, 'group-a-ca-after.crt')
    await writeFile(caAfter, (await centrals.southboundCa('group-a')) ?? '')
    t.not(await readFile(caAfter, 'utf8'), await readFile(ca, 'utf8'), 'started with a new CA')
    for (const [name, d] of [
      ['dpu-1', one],
      ['dpu-2', two],
    ] as const) {
      for (const trusted of [ca, caAfter]) {
        t.equal(
          (await southboundAnswer(sb, { ...d, ca: trusted })).state,
          'refused',
          `${name}'s certificate opens the restarted SB no more`,
        )
      }
    }
  },
)

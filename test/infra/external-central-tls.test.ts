/**
 * An operator's shared central over TLS (`OVN_NB_DB` / `OVN_SB_DB` as `ssl:` remotes): its
 * ovsdb-servers admit only clients with a certificate of their CA, and `npm start` reaches
 * both with the controller's own (`HYDRAZINE_OVN_CLIENT_CERT`, `_KEY`, `HYDRAZINE_OVN_CA`):
 * the NB takes the group's and hosts' rows, and a trace reads the SB (its facts over the
 * controller's connection, `ovn-trace` with the same certificate).
 */
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { eventually, startMain } from '../helpers/processes.ts'
import { groupSpec, hostSpec } from '../helpers/requests.ts'
import { tempDir } from '../helpers/stack.ts'
import { startOvsdb } from '../ovn/ovsdb-fixture.ts'

const run = promisify(execFile)

/** The parts of the API's answers this test reads. */
interface Answer {
  readonly status?: { readonly phase?: string }
  readonly verdict?: string
  readonly error?: { readonly message?: string }
}

t.test('npm start reaches an ssl: NB and SB with its client certificate', async (t) => {
  const dir = await tempDir(t)
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const server = await ca.writeIssued('ovsdb', await ca.issueServer({ ips: ['127.0.0.1'] }))
  const client = await ca.writeIssued(
    'controller',
    await ca.issueClient({ commonName: 'hydrazine-controller' }),
  )
  const ssl = { keyFile: server.keyFile, certFile: server.certFile, caFile: ca.caFile }
  const nb = await startOvsdb(t, '/usr/share/ovn/ovn-nb.ovsschema', { ssl })
  const sb = await startOvsdb(t, '/usr/share/ovn/ovn-sb.ovsschema', { ssl })
  if (!nb.ssl || !sb.ssl) throw new Error('ovsdb fixture without ssl:')
  const northd = await startDaemon({
    name: 'ovn-northd(test)',
    command: 'ovn-northd',
    args: [
      `--ovnnb-db=${nb.unix}`,
      `--ovnsb-db=${sb.unix}`,
      `--unixctl=${join(dir, 'northd.ctl')}`,
      `--pidfile=${join(dir, 'northd.pid')}`,
      `--log-file=${join(dir, 'northd.log')}`,
    ],
    logFile: join(dir, 'northd.out'),
  })
  t.teardown(() => northd.stop())

  const port = await freePort()
  const dataDir = await tempDir(t)
  const main = startMain({
    HYDRAZINE_DATA_DIR: dataDir,
    HYDRAZINE_HTTP_PORT: String(port),
    HYDRAZINE_GRPC_PORT: '0',
    OVN_NB_DB: nb.ssl,
    OVN_SB_DB: sb.ssl,
    HYDRAZINE_OVN_CLIENT_CERT: client.certFile,
    HYDRAZINE_OVN_CLIENT_KEY: client.keyFile,
    HYDRAZINE_OVN_CA: ca.caFile,
  })
  t.teardown(() => {
    main.child.kill('SIGKILL')
  })
  t.ok(
    await eventually(async () => main.output().includes('Hydrazine is up'), 60_000),
    `it starts (${main.output().slice(-400)})`,
  )
  const base = `http://127.0.0.1:${port}`
  const readyz = await fetch(`${base}/readyz`)
  t.same(
    ((await readyz.json()) as { checks?: unknown }).checks,
    { redis: 'ok', agentsRedis: 'ok', ovnNb: 'ok' },
    'the ssl: NB answers the readiness check',
  )

  const token = await readFile(`${dataDir}/operator-token`, 'utf8')
  const headers = {
    authorization: `Bearer ${token.trim()}`,
    'content-type': 'application/json',
  }
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}/v1${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: res.status, json: (await res.json()) as Answer }
  }
  t.equal((await call('PUT', '/resource-groups/group-a', groupSpec())).status, 202)
  t.ok(
    await eventually(
      async () => (await call('GET', '/resource-groups/group-a')).json.status?.phase === 'Ready',
      30_000,
    ),
    'the group is Ready: its rows are in the ssl: NB',
  )
  for (const [name, n] of [
    ['h1', 1],
    ['h2', 2],
  ] as const) {
    t.equal(
      (await call('PUT', `/managed-resources/${name}`, hostSpec('group-a', 'dpu-1', n))).status,
      202,
    )
  }
  const ports = async () =>
    (
      await run('ovn-nbctl', [
        `--db=${nb.unix}`,
        '--bare',
        '--columns=name',
        'list',
        'Logical_Switch_Port',
      ])
    ).stdout
      .split('\n')
      .filter((line) => /^hz\/group-a\/h\d$/.test(line))
      .sort()
  t.ok(
    await eventually(async () => (await ports()).length === 2, 30_000),
    'both hosts have their ports in the NB (they wait for their DPU: no agent runs here)',
  )
  t.same(await ports(), ['hz/group-a/h1', 'hz/group-a/h2'])

  let verdict: unknown
  const traced = await eventually(async () => {
    const answer = await call('GET', '/trace?from=h1&to=h2')
    verdict = answer.status === 200 ? answer.json.verdict : answer.json.error?.message
    return verdict === 'delivered'
  }, 30_000)
  t.ok(traced, `a trace reads the ssl: SB: h1 → h2 delivered (last: ${String(verdict)})`)

  main.child.kill('SIGINT')
  t.equal(await main.exited, 0, 'exits cleanly')
})

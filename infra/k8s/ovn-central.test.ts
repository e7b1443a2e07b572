/**
 * A group central's containers, run here as their pod would run them: the very commands
 * and environment of the StatefulSet the provider creates, against Debian's OVN (what
 * infra/k8s/Containerfile installs), with the directories and ports moved into a test
 * directory. Skipped where OVN is not installed.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { IContainer } from 'kubernetes-models/v1/Container'
import t, { type Test } from 'tap'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { freePort } from '../../lib/process/ports.ts'
import { centralObjects } from './ovn-central.ts'

const run = promisify(execFile)
const hasOvn = await run('which', ['ovsdb-server', 'ovn-northd', 'ovn-nbctl']).then(
  () => true,
  () => false,
)

interface Pod {
  readonly dir: string
  readonly ports: Record<string, number>
  /** Starts one container's command; stopped at the end of the test. */
  start(name: 'nb' | 'sb' | 'northd'): ChildProcess
  /** Runs a database container's postStart hook; resolves its exit code. */
  postStart(name: 'nb' | 'sb'): Promise<number>
  /** Runs a container's readiness probe (its run directory moved here); resolves its exit code. */
  probe(name: 'nb' | 'sb' | 'northd'): Promise<number>
  stop(): Promise<void>
}

async function pod(t: Test, settings: Partial<KubernetesCentralsConfig>): Promise<Pod> {
  const dir = t.testdir({ db: {}, run: {}, tls: {} })
  const { statefulSet } = centralObjects('tenant-a', {
    namespace: 'hydrazine',
    image: 'local',
    replicas: 1,
    storage: '1Gi',
    clusterDomain: 'cluster.local',
    ...settings,
  })
  const containers = statefulSet.spec?.template.spec?.containers ?? []
  const ports: Record<string, number> = {}
  for (const key of ['NB_PORT', 'SB_PORT', 'SB_CONTROLLER_PORT', 'NB_RAFT_PORT', 'SB_RAFT_PORT'])
    ports[key] = await freePort()
  const envOf = (c: IContainer) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '' }
    for (const e of c.env ?? []) {
      const field = e.valueFrom?.fieldRef?.fieldPath
      env[e.name] =
        field === 'metadata.name'
          ? `${statefulSet.metadata?.name}-0`
          : field
            ? 'hydrazine'
            : (e.value ?? '')
    }
    return {
      ...env,
      OVN_DB_DIR: join(dir, 'db'),
      OVN_RUN_DIR: join(dir, 'run'),
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      ...(settings.sbTlsSecret ? { SB_TLS_DIR: join(dir, 'tls') } : {}),
    }
  }
  const find = (name: string) => {
    const found = containers.find((c) => c.name === name)
    if (!found) throw new Error(`no container ${name}`)
    return found
  }
  const children: ChildProcess[] = []
  const p: Pod = {
    dir,
    ports,
    start(name) {
      const c = find(name)
      const [command = '', ...args] = c.command ?? []
      const child = spawn(command, args, { env: envOf(c), stdio: 'ignore' })
      children.push(child)
      return child
    },
    async probe(name) {
      const c = find(name)
      const [command = '', ...args] = (c.readinessProbe?.exec?.command ?? []).map((arg) =>
        arg.replace('/var/run/ovn', join(dir, 'run')),
      )
      return run(command, args, { timeout: 10_000 }).then(
        () => 0,
        (error: { code?: number }) => error.code ?? 1,
      )
    },
    async postStart(name) {
      const c = find(name)
      const [command = '', ...args] = c.lifecycle?.postStart?.exec?.command ?? []
      return run(command, args, { env: envOf(c), timeout: 60_000 }).then(
        () => 0,
        (error: { code?: number }) => error.code ?? 1,
      )
    },
    async stop() {
      await Promise.all(
        children.splice(0).map(
          (child) =>
            new Promise<void>((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done()
              child.once('exit', () => done())
              child.kill('SIGTERM')
            }),
        ),
      )
    },
  }
  t.teardown(() => p.stop())
  return p
}

/** Retries `check` until it passes (10 s at most). */
async function eventually<T>(check: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await check()
    } catch (error) {
      if (i >= 100) throw error
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

t.test(
  'one replica: NB, SB and northd answer, and keep the data across a restart',
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const p = await pod(t, {})
    for (const c of ['nb', 'sb', 'northd'] as const) p.start(c)
    const nb = `--db=tcp:127.0.0.1:${p.ports.NB_PORT}`
    const sb = `--db=tcp:127.0.0.1:${p.ports.SB_PORT}`
    await eventually(() =>
      run('ovsdb-client', [
        '--timeout=3',
        'wait',
        `unix:${p.dir}/run/nb.sock`,
        'OVN_Northbound',
        'connected',
      ]),
    )
    for (const c of ['nb', 'sb', 'northd'] as const)
      t.equal(
        await eventually(async () => {
          if ((await p.probe(c)) !== 0) throw new Error(`${c} not ready`)
          return 0
        }),
        0,
        `${c}: its readiness probe passes`,
      )
    t.equal(await p.postStart('nb'), 0, 'postStart: nothing to do, exits 0')
    t.equal(await p.postStart('sb'), 0)
    await eventually(() => run('ovn-nbctl', [nb, '--timeout=3', 'ls-add', 'sw0']))
    const bound = await eventually(async () => {
      const { stdout } = await run('ovn-sbctl', [
        sb,
        '--timeout=3',
        '--bare',
        '--columns=external_ids',
        'list',
        'Datapath_Binding',
      ])
      if (!stdout.includes('sw0')) throw new Error('northd has not compiled sw0 yet')
      return stdout
    })
    t.match(bound, /sw0/, 'northd compiled the NB switch into the SB')

    await p.stop()
    p.start('nb')
    const { stdout } = await eventually(() => run('ovn-nbctl', [nb, '--timeout=3', 'ls-list']))
    t.match(stdout, /sw0/, 'the database is on the volume: a restarted server has it')
  },
)

t.test(
  'an SB with TLS: ssl: with a client certificate, plaintext for the controller',
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const p = await pod(t, { sbTlsSecret: 'ovn-sb-tls' })
    const ca = await openCertificateAuthority(join(p.dir, 'pki'))
    const server = await ca.issueServer({ ips: ['127.0.0.1'], dnsNames: ['localhost'] })
    // What the Secret's volume holds.
    await writeFile(join(p.dir, 'tls', 'tls.crt'), server.cert)
    await writeFile(join(p.dir, 'tls', 'tls.key'), server.key)
    await writeFile(join(p.dir, 'tls', 'ca.crt'), ca.caCert)
    const chassis = await ca.writeIssued('chassis', await ca.issueIdentity({ commonName: 'dpu-1' }))

    p.start('sb')
    await eventually(() =>
      run('ovsdb-client', [
        '--timeout=3',
        'list-dbs',
        `tcp:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`,
      ]),
    )
    t.equal(await p.postStart('sb'), 0, 'postStart set the pssl: remote with its role')
    const { stdout } = await eventually(() =>
      run('ovsdb-client', [
        '--timeout=3',
        `--private-key=${chassis.keyFile}`,
        `--certificate=${chassis.certFile}`,
        `--ca-cert=${chassis.caFile}`,
        'list-dbs',
        `ssl:127.0.0.1:${p.ports.SB_PORT}`,
      ]),
    )
    t.match(stdout, /OVN_Southbound/, 'a chassis certificate from the CA gets in over ssl:')
    const { stdout: role } = await run('ovn-sbctl', [
      `--db=tcp:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`,
      '--bare',
      '--columns=role',
      'list',
      'Connection',
    ])
    t.equal(role.trim(), 'ovn-controller', "DPUs get OVN's ovn-controller RBAC role")
  },
)

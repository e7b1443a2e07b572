/**
 * A group central's NetworkPolicy: who may reach which port, in every SB configuration.
 *
 * Its containers, run here as their pod would run them: the very commands and environment
 * of the StatefulSet the provider creates, against Debian's OVN (what
 * infra/k8s/Containerfile installs), with the directories and ports moved into a test
 * directory. Skipped where OVN is not installed.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IContainer } from 'kubernetes-models/v1/Container'
import t, { type Test } from 'tap'
import { CENTRAL_PORTS, centralObjects } from '../../infra/k8s/ovn-central.ts'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import { OvsdbClient } from '../../lib/ovn/client.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { freePort } from '../../lib/process/ports.ts'
import { admits, type Source } from '../helpers/k8s/fake-network-plugin.ts'

const base: KubernetesCentralsConfig = {
  namespace: 'hydrazine',
  image: 'local',
  replicas: 3,
  storage: '1Gi',
  clusterDomain: 'cluster.local',
  controllerCidrs: ['10.0.0.0/24', 'fd00:10::/64'],
}

t.test('the NetworkPolicy: a valid object that selects the central pods', async (t) => {
  const { networkPolicy, statefulSet } = centralObjects('tenant-a', {
    ...base,
    dpuCidrs: ['172.18.0.0/24'],
  })
  t.doesNotThrow(() => networkPolicy.validate(), 'matches the Kubernetes schema')
  t.equal(networkPolicy.metadata?.name, statefulSet.metadata?.name)
  t.same(networkPolicy.metadata?.labels, statefulSet.metadata?.labels)
  t.same(networkPolicy.spec?.podSelector.matchLabels, statefulSet.spec?.selector.matchLabels)
  t.same(networkPolicy.spec?.policyTypes, ['Ingress'], 'ingress only: the pods may call out')
  t.same(
    networkPolicy.spec?.ingress?.map((rule) => rule.from),
    [
      [{ podSelector: { matchLabels: statefulSet.spec?.selector.matchLabels } }],
      [{ ipBlock: { cidr: '10.0.0.0/24' } }, { ipBlock: { cidr: 'fd00:10::/64' } }],
      [{ ipBlock: { cidr: '172.18.0.0/24' } }],
    ],
    'its peers: the pods of the central, the controller nodes, the DPUs',
  )
})

t.test('the NetworkPolicy: which port answers whom', async (t) => {
  const { nb, sb, nbRaft, sbRaft, sbController } = CENTRAL_PORTS
  const controller: Source = { ip: '10.0.0.11' }
  const controllerV6: Source = { ip: 'fd00:10::11' }
  const dpu: Source = { ip: '172.18.0.21' }
  const tenantPod: Source = { ip: '10.244.3.7' }
  const pod: Source = 'central pod'
  // Per case: the rules' [ports, peers], then each source's reachable ports.
  const cases: {
    name: string
    settings: Partial<KubernetesCentralsConfig>
    rules: [number[], string[] | 'anyone'][]
    reaches: [string, Source, number[]][]
  }[] = [
    {
      name: 'TLS SB, no DPU CIDRs: the SB open to all, authenticated by certificates',
      settings: { sbTlsSecret: 'ovn-sb-tls' },
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [
          [nb, sbController],
          ['10.0.0.0/24', 'fd00:10::/64'],
        ],
        [[sb], 'anyone'],
      ],
      reaches: [
        ['the controller', controller, [nb, sb, sbController]],
        ['the controller over IPv6', controllerV6, [nb, sb, sbController]],
        ['a DPU', dpu, [sb]],
        ["another tenant's pod", tenantPod, [sb]],
        ['a pod of the central', pod, [sb, nbRaft, sbRaft]],
      ],
    },
    {
      name: 'TLS SB with DPU CIDRs: the SB for the DPUs only',
      settings: { sbTlsSecret: 'ovn-sb-tls', dpuCidrs: ['172.18.0.0/24'] },
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [
          [nb, sbController],
          ['10.0.0.0/24', 'fd00:10::/64'],
        ],
        [[sb], ['172.18.0.0/24']],
      ],
      reaches: [
        ['the controller', controller, [nb, sbController]],
        ['a DPU', dpu, [sb]],
        ["another tenant's pod", tenantPod, []],
        ['a pod of the central', pod, [nbRaft, sbRaft]],
      ],
    },
    {
      name: 'plaintext SB: the controller and the DPUs, no one else',
      settings: { dpuCidrs: ['172.18.0.0/24', '172.19.0.0/24'] },
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [
          [nb, sb],
          ['10.0.0.0/24', 'fd00:10::/64'],
        ],
        [[sb], ['172.18.0.0/24', '172.19.0.0/24']],
      ],
      reaches: [
        ['the controller', controller, [nb, sb]],
        ['a DPU', dpu, [sb]],
        ['a DPU of the second fabric', { ip: '172.19.0.5' }, [sb]],
        ["another tenant's pod", tenantPod, []],
        ['a pod of the central', pod, [nbRaft, sbRaft]],
      ],
    },
    {
      name: 'plaintext SB and no DPU CIDRs (the config refuses it): closed, not open',
      settings: {},
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [
          [nb, sb],
          ['10.0.0.0/24', 'fd00:10::/64'],
        ],
      ],
      reaches: [
        ['the controller', controller, [nb, sb]],
        ['a DPU', dpu, []],
        ["another tenant's pod", tenantPod, []],
      ],
    },
    {
      name: 'TLS NB and SB: the NB still from the controller only',
      settings: {
        sbTlsSecret: 'ovn-sb-tls',
        nbTlsSecret: 'ovn-nb-tls',
        dpuCidrs: ['172.18.0.0/24'],
      },
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [
          [nb, sbController],
          ['10.0.0.0/24', 'fd00:10::/64'],
        ],
        [[sb], ['172.18.0.0/24']],
      ],
      reaches: [
        ['the controller', controller, [nb, sbController]],
        ['a DPU', dpu, [sb]],
        ["another tenant's pod", tenantPod, []],
        ['a pod of the central', pod, [nbRaft, sbRaft]],
      ],
    },
    {
      name: 'no controller CIDRs: no one reaches the NB',
      settings: { controllerCidrs: [], dpuCidrs: ['172.18.0.0/24'] },
      rules: [
        [[nbRaft, sbRaft], ['central pods']],
        [[sb], ['172.18.0.0/24']],
      ],
      reaches: [
        ['the controller', controller, []],
        ["another tenant's pod", tenantPod, []],
      ],
    },
  ]
  const allPorts = Object.values(CENTRAL_PORTS)
  for (const c of cases) {
    const { networkPolicy } = centralObjects('tenant-a', { ...base, ...c.settings })
    t.doesNotThrow(() => networkPolicy.validate(), `${c.name}: valid`)
    const policy = networkPolicy.toJSON() as INetworkPolicy
    const rules = (policy.spec?.ingress ?? []).map((rule) => [
      (rule.ports ?? []).map((p) => p.port),
      rule.from === undefined
        ? 'anyone'
        : rule.from.map((peer) => peer.ipBlock?.cidr ?? (peer.podSelector && 'central pods')),
    ])
    t.same(rules, c.rules, `${c.name}: the rules`)
    for (const [who, source, ports] of c.reaches) {
      const reached = allPorts.filter((port) => admits(policy, source, port)).sort()
      t.same(
        reached,
        [...ports].sort(),
        `${c.name}: ${who} reaches ${ports.join(', ') || 'nothing'}`,
      )
    }
  }
})

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
  const dir = t.testdir({ db: {}, run: {}, tls: {}, 'nb-tls': {} })
  const { statefulSet } = centralObjects('tenant-a', {
    namespace: 'hydrazine',
    image: 'local',
    replicas: 1,
    storage: '1Gi',
    clusterDomain: 'cluster.local',
    controllerCidrs: ['127.0.0.0/8'],
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
      ...(settings.nbTlsSecret ? { NB_TLS_DIR: join(dir, 'nb-tls') } : {}),
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

t.test(
  "an NB with TLS: the controller's client certificate gets in over ssl:, nothing else does",
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const p = await pod(t, { nbTlsSecret: 'ovn-nb-tls' })
    const ca = await openCertificateAuthority(join(p.dir, 'pki'))
    const server = await ca.issueServer({ ips: ['127.0.0.1'], dnsNames: ['localhost'] })
    // What the NB Secret's volume holds: its certificate, and the CA of its clients.
    await writeFile(join(p.dir, 'nb-tls', 'tls.crt'), server.cert)
    await writeFile(join(p.dir, 'nb-tls', 'tls.key'), server.key)
    await writeFile(join(p.dir, 'nb-tls', 'ca.crt'), ca.caCert)
    const controller = await ca.writeIssued(
      'controller',
      await ca.issueClient({ commonName: 'hydrazine-controller' }),
    )
    const stranger = await openCertificateAuthority(join(p.dir, 'stranger'))
    const forged = await stranger.writeIssued(
      'forged',
      await stranger.issueClient({ commonName: 'hydrazine-controller' }),
    )
    p.start('nb')
    await eventually(() =>
      run('ovsdb-client', ['--timeout=3', 'list-dbs', `unix:${p.dir}/run/nb.sock`]),
    )
    const remote = `ssl:127.0.0.1:${p.ports.NB_PORT}`
    // As the controller's NB connections do (infra/controller.ts: NbPool with `nbTls`).
    const listDbs = async (target: string, tls?: { ca: string; cert: string; key: string }) => {
      const client = await OvsdbClient.connect(target, {
        ...(tls ? { tls } : {}),
        reconnect: false,
        connectTimeoutMs: 3000,
        requestTimeoutMs: 3000,
      })
      try {
        return await client.request('list_dbs', [])
      } finally {
        await client.close()
      }
    }
    const asController = { ca: ca.caFile, cert: controller.certFile, key: controller.keyFile }
    t.same(
      await eventually(() => listDbs(remote, asController)),
      ['OVN_Northbound', '_Server'],
      "the controller's client certificate reads the NB over ssl:",
    )
    await t.rejects(
      listDbs(remote, { ...asController, cert: forged.certFile, key: forged.keyFile }),
      'a client certificate of another CA is refused',
    )
    await t.rejects(
      listDbs(`tcp:127.0.0.1:${p.ports.NB_PORT}`),
      'plaintext gets no answer: the NB speaks TLS only',
    )
    await t.rejects(
      listDbs(remote, { ...asController, ca: stranger.caFile }),
      'and the controller refuses an NB whose certificate its CA did not sign',
    )
  },
)

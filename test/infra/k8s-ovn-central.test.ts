/**
 * A group central's NetworkPolicy: who may reach which port, in every SB configuration.
 *
 * Its containers, run here as their pod would run them: the very commands and environment
 * of the StatefulSet the provider creates, against Debian's OVN (what
 * infra/k8s/Containerfile installs), with the directories and ports moved into a test
 * directory. Skipped where OVN is not installed. The raft replicas each run in a mount
 * namespace of their own (`unshare`, as root) whose /etc/hosts names the pods as the
 * peers Service's DNS would, each at its own loopback address.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IContainer } from 'kubernetes-models/v1/Container'
import t, { type Test } from 'tap'
import {
  CENTRAL_PORTS,
  centralName,
  centralObjects,
  chassisSecretName,
} from '../../infra/k8s/ovn-central.ts'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import { OvsdbClient } from '../../lib/ovn/client.ts'
import { openCertificateAuthority, trustedBy } from '../../lib/pki/index.ts'
import { freePort } from '../../lib/process/ports.ts'
import { NS, setup } from '../helpers/k8s/fake-centrals.ts'
import { admits, type Source } from '../helpers/k8s/fake-network-plugin.ts'
import { southboundAnswer } from '../helpers/southbound.ts'

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
      name: 'plaintext SB beside a TLS NB: the controller on its own ssl: SB port, the DPUs on 6642',
      settings: { nbTlsSecret: 'ovn-nb-tls', dpuCidrs: ['172.18.0.0/24'] },
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

type ContainerName = 'nb' | 'sb' | 'sb-relay' | 'northd'

interface Pod {
  readonly dir: string
  readonly ports: Record<string, number>
  /** Starts one container's command; stopped at the end of the test. */
  start(name: ContainerName): ChildProcess
  /** Runs a database container's postStart hook; resolves its exit code. */
  postStart(name: 'nb' | 'sb'): Promise<number>
  /** Runs a container's readiness probe (its run directory moved here); resolves its exit code. */
  probe(name: ContainerName): Promise<number>
  stop(): Promise<void>
}

/** Where a replica of a raft central runs: its ordinal, and what its pod's DNS would answer. */
interface Replica {
  /** The pod's ordinal: `POD_NAME` is `<statefulset>-<index>`. */
  readonly index: number
  /** Its own test directory (each replica has its own volume and run directory). */
  readonly dir: string
  /**
   * A hosts file naming the pods (`<pod>.<peers Service>...`): the containers run in a
   * mount namespace of their own where it is /etc/hosts, as the cluster's DNS would answer.
   */
  readonly hosts: string
  /** Ports every replica shares (raft's: each listens on its own address). */
  readonly ports: Record<string, number>
}

async function pod(
  t: Test,
  settings: Partial<KubernetesCentralsConfig> & { readonly chassisCa?: boolean },
  replica?: Replica,
  /** Its directory (`db`, `run`, `tls`, `nb-tls`), when a test runs several pods. */
  own?: string,
): Promise<Pod> {
  const dir = replica?.dir ?? own ?? t.testdir({ db: {}, run: {}, tls: {}, 'nb-tls': {} })
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
    ports[key] = replica?.ports[key] ?? (await freePort())
  const envOf = (c: IContainer) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '' }
    for (const e of c.env ?? []) {
      const field = e.valueFrom?.fieldRef?.fieldPath
      env[e.name] =
        field === 'metadata.name'
          ? `${statefulSet.metadata?.name}-${replica?.index ?? 0}`
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
      // The relay looks for a new CA every second here, not every 5.
      RELAY_CA_POLL_SECONDS: '1',
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
      const child = replica
        ? spawn(
            'unshare',
            [
              '--mount',
              '--propagation',
              'private',
              '/bin/sh',
              '-c',
              'mount --bind "$0" /etc/hosts && exec "$@"',
              replica.hosts,
              command,
              ...args,
            ],
            { env: envOf(c), stdio: 'ignore' },
          )
        : spawn(command, args, { env: envOf(c), stdio: 'ignore' })
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
  'an SB with TLS and a plaintext NB (asked for): ssl: for chassis, plaintext for the controller',
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

t.test(
  "TLS NB and SB: the controller's SB port is ssl: with its client certificate, the DPUs' is the relay's",
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const p = await pod(t, { nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls' })
    // The central's own certificate (the NB Secret) and the controller's, from one CA.
    const central = await openCertificateAuthority(join(p.dir, 'central-ca'))
    const own = await central.issuePeer({ ips: ['127.0.0.1'], dnsNames: ['localhost'] })
    await writeFile(join(p.dir, 'nb-tls', 'tls.crt'), own.cert)
    await writeFile(join(p.dir, 'nb-tls', 'tls.key'), own.key)
    await writeFile(join(p.dir, 'nb-tls', 'ca.crt'), central.caCert)
    const controller = await central.writeIssued(
      'controller',
      await central.issueClient({ commonName: 'hydrazine-controller' }),
    )
    // The DPUs' SB Secret: its server certificate and the DPUs' CA.
    const dpus = await openCertificateAuthority(join(p.dir, 'dpu-ca'))
    const sbServer = await dpus.issueServer({ ips: ['127.0.0.1'], dnsNames: ['localhost'] })
    await writeFile(join(p.dir, 'tls', 'tls.crt'), sbServer.cert)
    await writeFile(join(p.dir, 'tls', 'tls.key'), sbServer.key)
    await writeFile(join(p.dir, 'tls', 'ca.crt'), dpus.caCert)
    const chassis = await dpus.writeIssued(
      'chassis',
      await dpus.issueIdentity({ commonName: 'dpu-1' }),
    )

    for (const c of ['nb', 'sb', 'sb-relay', 'northd'] as const) p.start(c)
    await eventually(() =>
      run('ovsdb-client', ['--timeout=3', 'list-dbs', `unix:${p.dir}/run/sb.sock`]),
    )
    t.equal(await p.postStart('sb'), 0, "postStart set the DPUs' pssl: remote with its role")

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
    const asController = { ca: central.caFile, cert: controller.certFile, key: controller.keyFile }
    const controllerSb = `ssl:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`
    t.same(
      await eventually(() => listDbs(controllerSb, asController)),
      ['OVN_Southbound', '_Server'],
      "the controller's client certificate reads the SB over ssl: on its own port",
    )
    await t.rejects(
      listDbs(controllerSb, { ...asController, cert: chassis.certFile, key: chassis.keyFile }),
      "a DPU's certificate (another CA) is refused on the controller's SB port",
    )
    await t.rejects(
      listDbs(`tcp:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`),
      "plaintext gets no answer there: the controller's SB port speaks TLS only",
    )

    // The DPUs' port, as ovn-controller reaches it (any server of a cluster: not the leader).
    const asChassis = (...args: string[]) =>
      run('ovn-sbctl', [
        `--db=ssl:127.0.0.1:${p.ports.SB_PORT}`,
        `--private-key=${chassis.keyFile}`,
        `--certificate=${chassis.certFile}`,
        `--ca-cert=${chassis.caFile}`,
        '--no-leader-only',
        '--timeout=5',
        ...args,
      ])
    // Once northd has written the ovn-controller role and the relay has it.
    await eventually(() => asChassis('chassis-add', 'dpu-1', 'geneve', '172.18.0.11'))
    t.pass("a chassis certificate registers its own chassis through the relay's pssl:")
    const other = await asChassis('chassis-add', 'dpu-2', 'geneve', '172.18.0.12').then(
      () => '',
      (error: { stderr?: string }) => error.stderr ?? 'refused',
    )
    t.match(other, /permission error/, 'and not another: the relay enforces the RBAC role')
    t.same(
      await southboundAnswer(`ssl:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`, {
        key: controller.keyFile,
        cert: controller.certFile,
        ca: central.caFile,
      }),
      { state: 'admitted', chassis: ['dpu-1'] },
      'the write reached the SB itself; the controller reads it',
    )
    await t.rejects(
      run('ovsdb-client', [
        '--timeout=3',
        `--private-key=${controller.keyFile}`,
        `--certificate=${controller.certFile}`,
        `--ca-cert=${dpus.caFile}`,
        'list-dbs',
        `ssl:127.0.0.1:${p.ports.SB_PORT}`,
      ]),
      "the controller's certificate (not of the DPUs' CA) is refused on the DPUs' port",
    )
    t.equal(await p.probe('sb-relay'), 0, "the relay's readiness probe passes")
  },
)

const isRoot = process.getuid?.() === 0
const hasUnshare = await run('which', ['unshare']).then(
  () => true,
  () => false,
)

t.test(
  "three replicas: raft over ssl: with the central's certificate; another CA's server cannot join",
  {
    skip:
      (!hasOvn && 'OVN is not installed') ||
      ((!isRoot || !hasUnshare) && 'needs root and unshare: each replica gets its own /etc/hosts'),
  },
  async (t) => {
    const settings = { replicas: 3 as const, nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls' }
    const volume = () => ({ db: {}, run: {}, tls: {}, 'nb-tls': {} })
    const base = t.testdir({ r0: volume(), r1: volume(), r2: volume(), r3: volume(), pki: {} })
    const name = centralName('tenant-a')
    const peers = `${name}-peers.hydrazine.svc.cluster.local`
    // What the headless Service's DNS answers: each pod its own address.
    const address = (i: number) => `127.0.1.${i + 1}`
    const hosts = join(base, 'hosts')
    await writeFile(
      hosts,
      `127.0.0.1 localhost\n${[0, 1, 2, 3].map((i) => `${address(i)} ${name}-${i}.${peers}`).join('\n')}\n`,
    )
    const shared = { NB_RAFT_PORT: await freePort(), SB_RAFT_PORT: await freePort() }
    const central = await openCertificateAuthority(join(base, 'pki', 'central'))
    // The NB Secret every replica mounts: one certificate, both ends of raft's connections.
    const own = await central.issuePeer({ dnsNames: [`*.${peers}`], ips: ['127.0.0.1'] })
    const stranger = await openCertificateAuthority(join(base, 'pki', 'stranger'))
    const forged = await stranger.issuePeer({ dnsNames: [`*.${peers}`], ips: ['127.0.0.1'] })
    const replicas: Pod[] = []
    for (const i of [0, 1, 2, 3]) {
      const dir = join(base, `r${i}`)
      const [identity, ca] = i === 3 ? [forged, stranger] : [own, central]
      await writeFile(join(dir, 'nb-tls', 'tls.crt'), identity.cert)
      await writeFile(join(dir, 'nb-tls', 'tls.key'), identity.key)
      await writeFile(join(dir, 'nb-tls', 'ca.crt'), ca.caCert)
      replicas.push(await pod(t, settings, { index: i, dir, hosts, ports: shared }))
    }
    const members = replicas.slice(0, 3)
    // Parallel, as the StatefulSet starts them (podManagementPolicy: Parallel).
    for (const r of members) for (const c of ['nb', 'sb'] as const) r.start(c)
    for (const [i, r] of members.entries())
      for (const c of ['nb', 'sb'] as const)
        await eventually(async () => {
          if ((await r.probe(c)) !== 0) throw new Error(`replica ${i} ${c}: not in its cluster`)
        })
    t.pass('every replica of both databases joined its cluster: each readiness probe passes')

    const servers = async (r: Pod, db: 'nb' | 'sb') => {
      const { stdout } = await run('ovs-appctl', [
        '-t',
        join(r.dir, 'run', `${db}.ctl`),
        'cluster/status',
        db === 'nb' ? 'OVN_Northbound' : 'OVN_Southbound',
      ])
      return [...stdout.matchAll(/\((\w+) at ([^)]+)\)/g)].map((m) => m[2]).sort()
    }
    for (const db of ['nb', 'sb'] as const) {
      const port = db === 'nb' ? shared.NB_RAFT_PORT : shared.SB_RAFT_PORT
      t.same(
        await eventually(async () => {
          const seen = await servers(members[0] as Pod, db)
          if (seen.length !== 3) throw new Error(`${seen.length} servers`)
          return seen
        }),
        [0, 1, 2].map((i) => `ssl:${name}-${i}.${peers}:${port}`),
        `${db}: three members, every one at an ssl: address`,
      )
    }

    // A write through one member's NB, as the controller makes it, read at another.
    const r1 = members[1] as Pod
    const controller = await central.writeIssued(
      'controller',
      await central.issueClient({ commonName: 'hydrazine-controller' }),
    )
    await eventually(() =>
      run('ovn-nbctl', [
        `--db=ssl:127.0.0.1:${r1.ports.NB_PORT}`,
        `--private-key=${controller.keyFile}`,
        `--certificate=${controller.certFile}`,
        `--ca-cert=${central.caFile}`,
        '--no-leader-only',
        '--timeout=5',
        'ls-add',
        'sw0',
      ]),
    )
    const r2 = members[2] as Pod
    const { stdout } = await eventually(async () => {
      const listed = await run('ovn-nbctl', [
        `--db=unix:${r2.dir}/run/nb.sock`,
        '--no-leader-only',
        'ls-list',
      ])
      if (!listed.stdout.includes('sw0')) throw new Error('not replicated yet')
      return listed
    })
    t.match(stdout, /sw0/, 'replicated over ssl: raft to another member')

    // A server whose certificate another CA issued tries to join as the fourth member.
    const intruder = replicas[3] as Pod
    intruder.start('nb')
    await eventually(() =>
      run('ovs-appctl', ['-t', join(intruder.dir, 'run', 'nb.ctl'), 'version']),
    )
    await new Promise((r) => setTimeout(r, 3000))
    const { stdout: status } = await run('ovs-appctl', [
      '-t',
      join(intruder.dir, 'run', 'nb.ctl'),
      'cluster/status',
      'OVN_Northbound',
    ])
    t.match(status, /Status: joining cluster/, 'another CA: it never gets in')
    t.equal((await servers(members[0] as Pod, 'nb')).length, 3, 'the cluster stays three')
    await t.rejects(
      OvsdbClient.connect(`tcp:${address(0)}:${shared.NB_RAFT_PORT}`, {
        reconnect: false,
        connectTimeoutMs: 2000,
        requestTimeoutMs: 2000,
      }).then((client) => client.request('list_dbs', []).finally(() => client.close())),
      'plaintext gets nothing from the raft port',
    )
  },
)

t.test(
  "a plaintext SB (asked for) beside a TLS NB: the DPUs' tcp:, the controller's still ssl:",
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const p = await pod(t, { nbTlsSecret: 'ovn-nb-tls', dpuCidrs: ['172.18.0.0/24'] })
    const central = await openCertificateAuthority(join(p.dir, 'central-ca'))
    const own = await central.issuePeer({ ips: ['127.0.0.1'] })
    await writeFile(join(p.dir, 'nb-tls', 'tls.crt'), own.cert)
    await writeFile(join(p.dir, 'nb-tls', 'tls.key'), own.key)
    await writeFile(join(p.dir, 'nb-tls', 'ca.crt'), central.caCert)
    const controller = await central.writeIssued(
      'controller',
      await central.issueClient({ commonName: 'hydrazine-controller' }),
    )
    p.start('sb')
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
    t.same(
      await eventually(() => listDbs(`tcp:127.0.0.1:${p.ports.SB_PORT}`)),
      ['OVN_Southbound', '_Server'],
      "the DPUs' SB answers plaintext, as asked",
    )
    t.same(
      await listDbs(`ssl:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`, {
        ca: central.caFile,
        cert: controller.certFile,
        key: controller.keyFile,
      }),
      ['OVN_Southbound', '_Server'],
      "the controller's port speaks TLS to its certificate",
    )
    await t.rejects(
      listDbs(`tcp:127.0.0.1:${p.ports.SB_CONTROLLER_PORT}`),
      'and nothing in plaintext',
    )
  },
)

t.test(
  'chassis CA relays: own group in, other out, leaver dropped',
  { skip: !hasOvn && 'OVN is not installed' },
  async (t) => {
    const tls = { nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls', chassisCa: true }
    const volume = () => ({ db: {}, run: {}, tls: {}, 'nb-tls': {} })
    const base = t.testdir({ pki: {}, dpu: {}, 'tenant-a': volume(), 'tenant-b': volume() })
    // The Secrets as the provider makes them (on the fake API), each group's own CA.
    const pki = await openCertificateAuthority(join(base, 'pki', 'hydrazine'))
    const { api, centrals, ready } = setup({ ...tls, dpuCa: trustedBy(pki.caCert) })
    const secretFiles = (group: string) =>
      Object.fromEntries(
        Object.entries(
          api.objects.secrets.get(`${NS}/${chassisSecretName(group)}`)?.data ?? {},
        ).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
      )
    const central = await openCertificateAuthority(join(base, 'pki', 'central'))
    const own = await central.issuePeer({ ips: ['127.0.0.1'], dnsNames: ['localhost'] })
    /** Puts the Secret's files where the relay reads them, swapped in at once as the kubelet does. */
    /**
     * Puts the Secret's files where the relay reads them as the kubelet does: each a
     * symlink into `..data`, itself a symlink to a new directory swapped in with one rename.
     */
    const mount = async (p: Pod, group: string) => {
      const tlsDir = join(p.dir, 'tls')
      const stamp = `..${Date.now()}-${Math.random().toString(36).slice(2)}`
      await mkdir(join(tlsDir, stamp))
      for (const key of ['ca.crt', 'tls.crt', 'tls.key']) {
        await writeFile(join(tlsDir, stamp, key), secretFiles(group)[key] ?? '')
        await symlink(join('..data', key), join(tlsDir, key)).catch(() => {})
      }
      await symlink(stamp, join(tlsDir, '..data_tmp'))
      await rename(join(tlsDir, '..data_tmp'), join(tlsDir, '..data'))
    }
    const pods: Record<string, Pod> = {}
    for (const group of ['tenant-a', 'tenant-b']) {
      await centrals.ensure(group).catch(() => {})
      ready(group)
      const p = await pod(t, tls, undefined, join(base, group))
      await writeFile(join(p.dir, 'nb-tls', 'tls.crt'), own.cert)
      await writeFile(join(p.dir, 'nb-tls', 'tls.key'), own.key)
      await writeFile(join(p.dir, 'nb-tls', 'ca.crt'), central.caCert)
      await mount(p, group)
      for (const c of ['nb', 'sb', 'northd'] as const) p.start(c)
      await eventually(() =>
        run('ovsdb-client', ['--timeout=3', 'list-dbs', `unix:${p.dir}/run/sb.sock`]),
      )
      t.equal(await p.postStart('sb'), 0, `${group}: postStart set the DPUs' pssl: remote`)
      p.start('sb-relay')
      pods[group] = p
    }
    const a = pods['tenant-a'] as Pod
    const b = pods['tenant-b'] as Pod

    // dpu-1 serves tenant-a: its identity key, certified by tenant-a's chassis CA.
    const issued = await pki.issueIdentity({ commonName: 'dpu-1' })
    const chassisCert = async (group: string, file: string) => {
      const cert = await centrals.chassisCertificate?.(group, {
        id: 'dpu-1',
        identity: issued.cert,
      })
      await writeFile(join(base, 'dpu', file), cert ?? '')
      await writeFile(join(base, 'dpu', `${group}-ca.crt`), secretFiles(group)['ca.crt'] ?? '')
      return join(base, 'dpu', file)
    }
    await writeFile(join(base, 'dpu', 'dpu.key'), issued.key)
    const key = join(base, 'dpu', 'dpu.key')
    const first = await chassisCert('tenant-a', 'first.crt')
    await chassisCert('tenant-b', 'unused.crt')
    const ask = (p: Pod, group: string, cert: string) =>
      southboundAnswer(
        `ssl:127.0.0.1:${p.ports.SB_PORT}`,
        {
          key,
          cert,
          ca: join(base, 'dpu', `${group}-ca.crt`),
        },
        'relay',
      )
    t.same(
      await eventually(async () => {
        const answer = await ask(a, 'tenant-a', first)
        if (answer.state !== 'admitted') throw new Error(JSON.stringify(answer))
        return answer
      }),
      { state: 'admitted', chassis: [] },
      "tenant-a's relay admits a chassis certificate of tenant-a's CA",
    )
    t.same(
      await eventually(async () => {
        const answer = await ask(b, 'tenant-b', first)
        if (answer.state === 'error') throw new Error(answer.said)
        return answer
      }),
      { state: 'refused' },
      "tenant-b's relay refuses it (trusting tenant-b's CA, as its DPUs do)",
    )
    const identity = join(base, 'dpu', 'identity.crt')
    await writeFile(identity, issued.cert)
    t.same(
      await ask(a, 'tenant-a', identity),
      { state: 'refused' },
      "the DPU's identity itself (Hydrazine's CA) does not open tenant-a's relay",
    )

    // A session open through tenant-a's relay, as an ovn-controller holds one.
    const session = spawn(
      'ovsdb-client',
      [
        `--private-key=${key}`,
        `--certificate=${first}`,
        `--ca-cert=${join(base, 'dpu', 'tenant-a-ca.crt')}`,
        'monitor',
        `ssl:127.0.0.1:${a.ports.SB_PORT}`,
        'OVN_Southbound',
        'SB_Global',
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    )
    t.teardown(() => session.kill())
    await new Promise<void>((done) => session.stdout?.once('data', () => done()))
    const ended = new Promise<void>((done) => session.once('exit', () => done()))

    // Another DPU leaves tenant-a: a new CA in its Secret, which the kubelet mounts.
    t.equal(await centrals.leaveChassis?.('tenant-a', 'dpu-2'), true, 'tenant-a: a DPU left')
    await mount(a, 'tenant-a')
    const dropped = await Promise.race([
      ended.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 10_000)),
    ])
    t.ok(dropped, 'the relay drops the session opened with the old CA')
    const renewed = await chassisCert('tenant-a', 'renewed.crt')
    t.same(
      await eventually(async () => {
        const answer = await ask(a, 'tenant-a', first)
        if (answer.state === 'error') throw new Error(answer.said)
        return answer
      }),
      { state: 'refused' },
      'the chassis certificate of the old CA is refused',
    )
    t.same(
      await eventually(async () => {
        const answer = await ask(a, 'tenant-a', renewed)
        if (answer.state !== 'admitted') throw new Error(JSON.stringify(answer))
        return answer
      }),
      { state: 'admitted', chassis: [] },
      "the DPU that stays, certified again, is admitted (trusting tenant-a's new CA)",
    )
  },
)

/**
 * The DPU's TLS identity: checked at start-up, required of gRPC clients (mTLS), and the
 * certificate ovn-controller shows an `ssl:` Southbound (whose CN OVN takes as the
 * chassis name).
 */
import { randomBytes, X509Certificate } from 'node:crypto'
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import * as grpc from '@grpc/grpc-js'
import { Queue, QueueEvents } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import type { AgentConfig } from '../../agent/config.ts'
import { startAgentRuntime } from '../../agent/runtime.ts'
import { loadAgentTls } from '../../agent/tls.ts'
import { run } from '../../infra/lab/dpu.ts'
import { type AgentStatus, createAgentClient } from '../../lib/agent-protocol/grpc.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureInput,
} from '../../lib/agent-protocol/index.ts'
import { ConfigError } from '../../lib/errors.ts'
import { parseRemote } from '../../lib/ovn/remote.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { type AgentLab, dpuState, startAgentLab, startTlsRedis } from './fixture.ts'
import { makeCa } from './pki.ts'

/** True once lib/ovn's OVSDB client connects to `ssl:` remotes. */
function ovsdbSpeaksSsl(): boolean {
  try {
    parseRemote('ssl:127.0.0.1:6642')
    return true
  } catch {
    return false
  }
}

/**
 * A private OVN central whose Southbound listens with TLS on the fabric
 * (`pssl:PORT:<gateway>`), requiring certificates from `ca`: NB and SB ovsdb-server and
 * ovn-northd, stopped when the lab ends.
 */
async function startSslCentral(
  lab: AgentLab & { later(fn: () => Promise<unknown>): void },
  tls: { ca: string; cert: string; key: string },
  name = 'ssl-central',
): Promise<{
  remote: string
  nbctl(...a: string[]): Promise<string>
  sbctl(...a: string[]): Promise<string>
}> {
  const dir = join(lab.dataDir, name)
  await mkdir(dir, { recursive: true })
  const env = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVN_RUNDIR: dir, OVN_LOGDIR: dir }
  const host = lab.fabric.gatewayIp
  const port = await freePort(host)
  const db = async (name: 'nb' | 'sb', extra: string[]) => {
    const file = join(dir, `${name}.db`)
    const sock = join(dir, `${name}.sock`)
    await run('ovsdb-tool', ['create', file, `/usr/share/ovn/ovn-${name}.ovsschema`])
    const daemon = await startDaemon({
      name: `ovsdb-server(${name}, ssl)`,
      command: 'ovsdb-server',
      args: [
        file,
        `--remote=punix:${sock}`,
        ...extra,
        `--unixctl=${join(dir, `${name}.ctl`)}`,
        `--pidfile=${join(dir, `${name}.pid`)}`,
        `--log-file=${join(dir, `${name}.log`)}`,
      ],
      env,
      logFile: join(dir, `${name}.out`),
      tailFiles: [join(dir, `${name}.log`)],
      ready: async () =>
        (await canConnect({ path: sock })) &&
        (extra.length === 0 || (await canConnect({ port, host }))),
    })
    lab.later(() => daemon.stop())
    return `unix:${sock}`
  }
  const nb = await db('nb', [])
  const sb = await db('sb', [
    `--remote=pssl:${port}:${host}`,
    `--private-key=${tls.key}`,
    `--certificate=${tls.cert}`,
    `--ca-cert=${tls.ca}`,
  ])
  const nbctl = (...a: string[]) => run('ovn-nbctl', [`--db=${nb}`, '--timeout=10', ...a])
  const northd = await startDaemon({
    name: 'ovn-northd(ssl)',
    command: 'ovn-northd',
    args: [
      `--ovnnb-db=${nb}`,
      `--ovnsb-db=${sb}`,
      `--unixctl=${join(dir, 'northd.ctl')}`,
      `--pidfile=${join(dir, 'northd.pid')}`,
      `--log-file=${join(dir, 'northd.log')}`,
    ],
    env,
    logFile: join(dir, 'northd.out'),
    ready: async () => {
      await nbctl('--timeout=5', '--wait=sb', 'sync')
      return true
    },
    readyTimeoutMs: 30_000,
  })
  lab.later(() => northd.stop())
  return {
    remote: `ssl:${host}:${port}`,
    nbctl,
    sbctl: (...a: string[]) => run('ovn-sbctl', [`--db=${sb}`, '--timeout=10', ...a]),
  }
}

t.test("the agent's connections carry the DPU's certificate", async (t) => {
  const lab = await startAgentLab(t)
  const pkiDir = join(lab.dataDir, 'pki')
  await mkdir(pkiDir)
  const ca = await makeCa(pkiDir, 'hydrazine-ca')
  const otherCa = await makeCa(pkiDir, 'other-ca')
  const dpuCert = await ca.issue(lab.dpuId)
  const tlsOptions: Partial<AgentConfig> = {
    tlsCert: dpuCert.cert,
    tlsKey: dpuCert.key,
    tlsCa: ca.ca,
    tlsServerCert: dpuCert.cert,
  }

  // The group, on a Southbound that only speaks TLS.
  // Named for the address it listens on: the agent checks the Southbound's name, not only its CA.
  const sbCert = await ca.issue('ovn-sb', [`IP:${lab.fabric.gatewayIp}`])
  const central = await startSslCentral(lab, { ca: ca.ca, ...sbCert })
  const group = lab.input.group.name
  await central.nbctl('ls-add', group)
  await central.nbctl(
    'lsp-add',
    group,
    lab.input.host.logicalPort,
    '--',
    'lsp-set-addresses',
    lab.input.host.logicalPort,
    `${lab.input.host.mac} 10.10.10.2`,
  )
  await central.nbctl('--wait=sb', 'sync')
  const input: ConfigureInput = {
    ...lab.input,
    group: { name: group, sbRemote: central.remote },
  }

  await t.test('start-up refuses an identity that is not this chassis', async (t) => {
    const other = await otherCa.issue(lab.dpuId)
    const stranger = await ca.issue('dpu-somewhere-else')
    const cases: [string, Partial<AgentConfig>, RegExp][] = [
      [
        'CN is not the system-id',
        { ...tlsOptions, systemId: 'chassis-x' },
        new RegExp(`--tls-cert .* has CN ${lab.dpuId} but the chassis name .* is chassis-x`),
      ],
      [
        'another DPU',
        { ...tlsOptions, tlsCert: stranger.cert, tlsKey: stranger.key },
        /has CN dpu-somewhere-else/,
      ],
      [
        'issued by another CA',
        { ...tlsOptions, tlsCert: other.cert, tlsKey: other.key },
        /--tls-cert .* was not issued by --tls-ca/,
      ],
      [
        "another certificate's key",
        { ...tlsOptions, tlsKey: other.key },
        /--tls-key .* is not the key of --tls-cert/,
      ],
      [
        'a server certificate for another key',
        { ...tlsOptions, tlsServerCert: stranger.cert },
        /--tls-server-cert .* is not for the key of --tls-key/,
      ],
      [
        'a missing file',
        { ...tlsOptions, tlsCa: join(pkiDir, 'nope.pem') },
        /--tls-ca .* cannot be read/,
      ],
      [
        'not a certificate',
        { ...tlsOptions, tlsCa: dpuCert.key },
        /--tls-ca .* not a PEM certificate/,
      ],
    ]
    for (const [what, extra, message] of cases) {
      const config = lab.config(extra)
      await t.rejects(loadAgentTls(config), ConfigError, what)
      await t.rejects(loadAgentTls(config), { message }, what)
    }
    const before = await dpuState(lab.dpu)
    await t.rejects(startAgentRuntime(lab.config({ ...tlsOptions, systemId: 'chassis-x' })), {
      code: 'CONFIG_INVALID',
    })
    t.same(await dpuState(lab.dpu), before, 'nothing touched')
    t.equal(await lab.heartbeat(), undefined, 'no heartbeat: it never started')
  })

  await t.test('without TLS, an ssl: Southbound is refused and nothing is touched', async (t) => {
    const plain = await startAgentRuntime(lab.plainConfig())
    try {
      const before = await dpuState(lab.dpu)
      const job = await lab.queue.add('configure', buildConfigurePayload('2.0', input), {
        jobId: 'configure-ssl-without-tls',
        attempts: 3,
      })
      await t.rejects(job.waitUntilFinished(lab.events, 20_000), /AGENT_SB_NEEDS_TLS: .*--tls-cert/)
      t.equal((await lab.queue.getJob('configure-ssl-without-tls'))?.attemptsMade, 1)
      t.same(await dpuState(lab.dpu), before, 'nothing touched')
    } finally {
      await plain.stop()
    }
  })

  const logs: string[] = []
  const runtime = await startAgentRuntime(
    lab.config({ ...tlsOptions, installTimeoutMs: 8000 }),
    (line) => {
      logs.push(line)
      console.error(line)
    },
  )
  lab.later(() => runtime.stop())

  /** The agent at `address` (default: this lab's) asked for its status with `credentials`. */
  const getStatus = (credentials: grpc.ChannelCredentials, address = runtime.grpcAddress) =>
    new Promise<AgentStatus>((resolve, reject) => {
      const client = createAgentClient(address, credentials)
      client.getStatus({}, { deadline: Date.now() + 5000 }, (err, status) => {
        client.close()
        if (err || !status) reject(err ?? new Error('no status'))
        else resolve(status)
      })
    })
  const pem = async (path: string) => Buffer.from(await run('cat', [path]))
  /** Client credentials for a certificate with this CN from Hydrazine's CA. */
  const clientOf = async (cn: string) => {
    const issued = await ca.issue(cn)
    return grpc.credentials.createSsl(
      await pem(ca.ca),
      await pem(issued.key),
      await pem(issued.cert),
    )
  }
  const impostor = await otherCa.issue('hydrazine-controller')
  const asController = await clientOf('hydrazine-controller')

  await t.test('gRPC serves only clients with a certificate from its CA', async (t) => {
    const refused: [string, grpc.ChannelCredentials][] = [
      ['plaintext', grpc.credentials.createInsecure()],
      ['TLS without a client certificate', grpc.credentials.createSsl(await pem(ca.ca))],
      [
        'a client certificate from another CA',
        grpc.credentials.createSsl(
          await pem(ca.ca),
          await pem(impostor.key),
          await pem(impostor.cert),
        ),
      ],
    ]
    for (const [what, credentials] of refused) {
      await t.rejects(getStatus(credentials), { code: grpc.status.UNAVAILABLE }, what)
    }
    const status = await getStatus(asController)
    t.equal(status.dpuId, lab.dpuId, 'a CA-signed client gets GetStatus')
  })

  await t.test('its heartbeat presents the identity, for the controller to record', async (t) => {
    t.equal((await lab.heartbeat())?.identity, await readFile(dpuCert.cert, 'utf8'))
  })

  await t.test("another DPU's certificate from the same CA is refused", async (t) => {
    // Every DPU holds a certificate from Hydrazine's CA; the CA alone must not let one
    // DPU read another's bound ports, relays and Southbound.
    const asOtherDpu = await clientOf('dpu-other')
    const denied = { code: grpc.status.PERMISSION_DENIED, details: /CN=dpu-other .*--grpc-clients/ }
    await t.rejects(getStatus(asOtherDpu), denied, 'GetStatus refused')
    const ping = new Promise((resolve, reject) => {
      const client = createAgentClient(runtime.grpcAddress, asOtherDpu)
      client.ping({ nonce: 'n' }, { deadline: Date.now() + 5000 }, (err, answer) => {
        client.close()
        err ? reject(err) : resolve(answer)
      })
    })
    await t.rejects(ping, denied, 'Ping refused')
    t.equal((await getStatus(asController)).dpuId, lab.dpuId, 'the controller still answered')
  })

  await t.test('ovn-controller shows the DPU certificate to an ssl: Southbound', async (t) => {
    const job = await lab.queue.add('configure', buildConfigurePayload('2.0', input), {
      jobId: 'configure-ssl',
    })
    const ack = await job.waitUntilFinished(lab.events, 40_000)
    t.match(ack, { hostPort: lab.host.hostPort, ovnInstalled: true, chassis: lab.dpuId })
    // The SB knows the chassis by the certificate's CN = system-id, and binds the host there.
    t.equal((await central.sbctl('--bare', '--columns=name', 'list', 'Chassis')).trim(), lab.dpuId)
    const chassis = (
      await central.sbctl(
        '--bare',
        '--columns=chassis',
        'find',
        'Port_Binding',
        `logical_port=${lab.input.host.logicalPort}`,
      )
    ).trim()
    t.equal(
      (await central.sbctl('--bare', '--columns=name', 'list', 'Chassis', chassis)).trim(),
      lab.dpuId,
    )
    const status = await getStatus(asController)
    t.equal(status.ovnRemote, central.remote)
    t.equal(status.ovnControllerConnected, true)
    const args = (await processesMentioning(`${lab.config().runDir}/ovn-controller.pid`)).join('\n')
    const presented = join(lab.config().runDir, 'sb-client.crt')
    t.match(args, `--certificate=${presented}`)
    t.equal(await readFile(presented, 'utf8'), await readFile(dpuCert.cert, 'utf8'), 'its identity')
    t.match(args, `--private-key=${join(lab.config().runDir, 'sb-client.key')}`)
    t.equal(
      await readFile(join(lab.config().runDir, 'sb-client.key'), 'utf8'),
      await readFile(dpuCert.key, 'utf8'),
      "its identity's key, in a file of the agent's own",
    )
    const trusted = join(lab.config().runDir, 'sb-ca.crt')
    t.match(args, `--ca-cert=${trusted}`)
    t.equal(
      await readFile(trusted, 'utf8'),
      await readFile(ca.ca, 'utf8'),
      'trusting --tls-ca when configure names no CA of the group',
    )
  })

  await t.test(
    'isolate counts the ssl: Southbound released only once it could check',
    async (t) => {
      const payload = buildIsolatePayload('1.0', {
        dpuId: lab.dpuId,
        specVersion: 2,
        group: { name: group },
        host: { name: 'h1', logicalPort: lab.input.host.logicalPort, hostPort: lab.host.hostPort },
      })
      const job = await lab.queue.add('isolate', payload, { jobId: 'isolate-ssl' })
      if (ovsdbSpeaksSsl()) {
        t.match(await job.waitUntilFinished(lab.events, 40_000), { unbound: true })
      } else {
        // lib/ovn cannot open ssl: yet: the agent cannot check, so it must not say released.
        await t.rejects(
          job.waitUntilFinished(lab.events, 40_000),
          /after 8000 ms, an SB still binds .* or could not be asked/,
        )
        t.match(logs.join('\n'), `cannot check southbound ${central.remote}`)
        t.match(logs.join('\n'), 'not counted as released')
      }
      t.notMatch(await lab.dpu.vsctl('list-ports', 'br-int'), lab.host.hostPort, 'port removed')
    },
  )
  await t.test(
    "a Southbound that admits only its group's chassis: configure's certificate",
    async (t) => {
      // The group's own chassis CA: it certifies the DPU's key, and its SB trusts nothing else.
      const groupCa = await openCertificateAuthority(join(pkiDir, 'group-ca'))
      const identity = await readFile(dpuCert.cert, 'utf8')
      const certified = await groupCa.certifyKeyOf(identity)
      const strangerIdentity = await readFile((await ca.issue(lab.dpuId)).cert, 'utf8')
      const notOurKey = await groupCa.certifyKeyOf(strangerIdentity)
      const own = await startSslCentral(
        lab,
        { ca: groupCa.caFile, ...(await ca.issue('ovn-sb-own', [`IP:${lab.fabric.gatewayIp}`])) },
        'own-central',
      )
      const ownGroup = 'group-own'
      const port = lab.input.host.logicalPort
      await own.nbctl('ls-add', ownGroup)
      await own.nbctl(
        'lsp-add',
        ownGroup,
        port,
        '--',
        'lsp-set-addresses',
        port,
        lab.input.host.mac,
      )
      await own.nbctl('--wait=sb', 'sync')
      const configure = async (jobId: string, sbCertificate?: string) => {
        const payload = buildConfigurePayload('2.0', {
          ...lab.input,
          group: {
            name: ownGroup,
            sbRemote: own.remote,
            ...(sbCertificate ? { sbCertificate } : {}),
          },
        })
        const job = await lab.queue.add('configure', payload, { jobId })
        return job.waitUntilFinished(lab.events, 40_000)
      }
      const isolate = async (jobId: string, groupName: string, specVersion: number) => {
        const payload = buildIsolatePayload('1.0', {
          dpuId: lab.dpuId,
          specVersion,
          group: { name: groupName },
          host: { name: 'h1', logicalPort: port, hostPort: lab.host.hostPort },
        })
        const job = await lab.queue.add('isolate', payload, { jobId })
        return job.waitUntilFinished(lab.events, 40_000)
      }
      /** An external_ids value of the DPU's Open_vSwitch row ('' when absent). */
      const ovsId = async (key: string) =>
        (
          await lab.dpu.vsctl('--if-exists', 'get', 'Open_vSwitch', '.', `external_ids:"${key}"`)
        ).trim()

      const before = await dpuState(lab.dpu)
      await t.rejects(
        configure('configure-own-wrong-key', notOurKey),
        /AGENT_SB_CERTIFICATE_REFUSED|does not certify this DPU's key/,
        'a certificate of another key is refused',
      )
      t.same(await dpuState(lab.dpu), before, 'and nothing is touched')

      const pidFile = join(lab.config().runDir, 'ovn-controller.pid')
      const pidBefore = (await readFile(pidFile, 'utf8')).trim()
      const ack = await configure('configure-own', certified)
      t.match(ack, { ovnInstalled: true, chassis: lab.dpuId }, 'with its own certificate: bound')
      t.equal(
        (await own.sbctl('--bare', '--columns=name', 'list', 'Chassis')).trim(),
        lab.dpuId,
        "the group's SB knows the chassis",
      )
      const presented = join(lab.config().runDir, 'sb-client.crt')
      t.equal(await readFile(presented, 'utf8'), certified, 'ovn-controller presents it')
      const pidFirst = (await readFile(pidFile, 'utf8')).trim()
      t.not(pidFirst, pidBefore, 'from a new start')
      t.equal(
        await ovsId('ovn-ofctrl-wait-before-clear'),
        '',
        'which does not wait before it clears what it finds: no host was served here, no flow to keep',
      )

      // Renewed while the host is bound: the restart keeps the host's traffic flowing.
      const renewed = await groupCa.certifyKeyOf(identity)
      t.not(renewed, certified, 'a renewed certificate')
      t.match(
        await configure('configure-own-renewed', renewed),
        { ovnInstalled: true },
        'bound with it',
      )
      t.equal(await readFile(presented, 'utf8'), renewed, 'ovn-controller presents it')
      t.not((await readFile(pidFile, 'utf8')).trim(), pidFirst, 'from another start')
      t.equal(
        JSON.parse(await ovsId('ovn-ofctrl-wait-before-clear')),
        '3000',
        'which keeps the flows it finds until it computed its own (the hosts keep their traffic)',
      )
      t.equal(
        JSON.parse(await ovsId('hydrazine:sb-certificate')),
        renewed,
        'kept in the OVS database too',
      )

      // A reboot empties the run dir; the OVS database keeps the certificate.
      await runtime.stop()
      await rm(presented)
      const rebooted = await startAgentRuntime(
        lab.config({ ...tlsOptions, installTimeoutMs: 8000 }),
      )
      lab.later(() => rebooted.stop())
      t.equal(await readFile(presented, 'utf8'), renewed, 'a restarted agent presents it again')
      t.ok(
        await eventually(
          async () => (await rebooted.agent.observe()).ovnController.connected,
          20_000,
        ),
        "and its ovn-controller is connected to the group's SB",
      )

      t.match(
        await isolate('isolate-own', ownGroup, 3),
        { unbound: true },
        'isolate asks that SB with the same certificate',
      )
      const keptFor = (remote: string) => ovsId(`hydrazine:sb-certificate@${remote}`)
      t.equal(JSON.parse(await keptFor(own.remote)), renewed, 'kept for that SB by its remote')

      // The DPU moves to the first group's SB, which takes its identity; then an isolate
      // retried from before the move still asks the own group's SB (remembered by OVS).
      const moved = buildConfigurePayload('2.0', { ...input, specVersion: 4 })
      const movedJob = await lab.queue.add('configure', moved, { jobId: 'configure-back' })
      t.match(await movedJob.waitUntilFinished(lab.events, 40_000), { ovnInstalled: true })
      t.equal(await readFile(presented, 'utf8'), identity, 'it presents its identity again')
      // (Where an agent before the notes' move to br-int remembered it: read there too.)
      await lab.dpu.vsctl(
        'set',
        'Open_vSwitch',
        '.',
        `external_ids:"hydrazine:releasing:${port}"="[\\"${own.remote}\\"]"`,
      )
      t.match(
        await isolate('isolate-retried', group, 4),
        { unbound: true },
        "the old group's SB is asked with the certificate it admits, not the identity",
      )
      t.equal(await keptFor(own.remote), '', 'then that SB is forgotten: nothing may ask it')
    },
  )

  await t.test(
    "an isolate brings the certificate of the group's new chassis CA: the port is released",
    async (t) => {
      // A group's SB whose chassis CA is replaced (another DPU left the group) after this
      // DPU's last configure: only the isolate can bring it a certificate the SB takes.
      const caFile = join(pkiDir, 'rotating-sb-ca.crt')
      const firstCa = await openCertificateAuthority(join(pkiDir, 'rotating-ca-1'))
      const secondCa = await openCertificateAuthority(join(pkiDir, 'rotating-ca-2'))
      await copyFile(firstCa.caFile, caFile)
      const name = 'rotating-central'
      const sb = await startSslCentral(
        lab,
        { ca: caFile, ...(await ca.issue('ovn-sb-rotating', [`IP:${lab.fabric.gatewayIp}`])) },
        name,
      )
      const rotating = 'group-rotating'
      const port = lab.input.host.logicalPort
      await sb.nbctl('ls-add', rotating)
      await sb.nbctl('lsp-add', rotating, port, '--', 'lsp-set-addresses', port, lab.input.host.mac)
      await sb.nbctl('--wait=sb', 'sync')
      const identity = await readFile(dpuCert.cert, 'utf8')
      const configure = buildConfigurePayload('2.0', {
        ...lab.input,
        specVersion: 5,
        group: {
          name: rotating,
          sbRemote: sb.remote,
          sbCertificate: await firstCa.certifyKeyOf(identity),
        },
      })
      const configured = await lab.queue.add('configure', configure, { jobId: 'configure-rot' })
      t.match(await configured.waitUntilFinished(lab.events, 40_000), { ovnInstalled: true })
      const boundTo = async () =>
        (
          await sb.sbctl(
            '--bare',
            '--columns=chassis',
            'find',
            'Port_Binding',
            `logical_port=${port}`,
          )
        ).trim()
      t.not(await boundTo(), '', 'the port is bound in the group SB')

      // The chassis CA is replaced and every session dropped, as a central does it.
      await copyFile(secondCa.caFile, caFile)
      await run('ovn-appctl', ['-t', join(lab.dataDir, name, 'sb.ctl'), 'ovsdb-server/reconnect'])
      // The isolate first comes with the certificate the replaced CA issued (sent before
      // the replacement): its attempt removes the port, and the SB refuses to be asked.
      const stale = buildIsolatePayload('2.0', {
        dpuId: lab.dpuId,
        specVersion: 5,
        group: { name: rotating, sbCertificate: await firstCa.certifyKeyOf(identity) },
        host: { name: 'h1', logicalPort: port, hostPort: lab.host.hostPort },
      })
      const first = await lab.queue.add('isolate', stale, { jobId: 'isolate-rot-stale' })
      await t.rejects(
        first.waitUntilFinished(lab.events, 40_000),
        /TLS with southbound .* failed \(ERR_SSL_/,
        "with the replaced CA's certificate the SB refuses to be asked: failed at once, saying so",
      )
      t.notMatch(await lab.dpu.vsctl('list-ports', 'br-int'), lab.host.hostPort, 'port removed')
      // Its next attempt carries the certificate of the new CA (the controller renewed it).
      const renewed = await secondCa.certifyKeyOf(identity)
      const payload = buildIsolatePayload('2.0', {
        dpuId: lab.dpuId,
        specVersion: 5,
        group: { name: rotating, sbCertificate: renewed },
        host: { name: 'h1', logicalPort: port, hostPort: lab.host.hostPort },
      })
      const isolated = await lab.queue.add('isolate', payload, { jobId: 'isolate-rot' })
      t.match(
        await isolated.waitUntilFinished(lab.events, 40_000),
        { unbound: true },
        'the isolate, retried with it after its port was gone, is acked unbound',
      )
      t.equal(await boundTo(), '', 'and the SB binds the port to no chassis')
      t.equal(
        await readFile(join(lab.config().runDir, 'sb-client.crt'), 'utf8'),
        renewed,
        'ovn-controller presents the new certificate',
      )
    },
  )

  await t.test('--grpc-clients names who may call', async (t) => {
    const asOperator = await clientOf('hz-operator')
    // One agent per DPU: the first one stops before another starts with other clients.
    await runtime.stop()
    const listed = await startAgentRuntime(
      lab.config({ ...tlsOptions, grpcClients: ['hz-operator'], metricsListen: 'off' }),
    )
    try {
      const statusFrom = (credentials: grpc.ChannelCredentials) =>
        getStatus(credentials, listed.grpcAddress)
      t.equal((await statusFrom(asOperator)).dpuId, lab.dpuId, 'a listed CN is answered')
      await t.rejects(
        statusFrom(asController),
        { code: grpc.status.PERMISSION_DENIED },
        'the controller, not listed, is refused',
      )
    } finally {
      await listed.stop()
    }
  })
})

t.test('a renewed identity is taken while the agent runs, by all it talks to', async (t) => {
  const lab = await startAgentLab(t)
  const dir = join(lab.dataDir, 'renewal')
  await mkdir(dir)
  const root = await openCertificateAuthority(join(dir, 'ca'))
  const files = await root.writeIssued(
    'controller',
    await root.issueClient({ commonName: 'hydrazine-controller' }),
  )
  const pemOf = (path: string) => readFile(path, 'utf8')
  const controller = {
    ca: root.caCert,
    cert: await pemOf(files.certFile),
    key: await pemOf(files.keyFile),
  }

  // The agents' Redis over TLS, admitting client certificates of the CA only.
  const redisFiles = await root.writeIssued(
    'redis',
    await root.issueServer({ commonName: 'redis', ips: ['127.0.0.1'] }),
  )
  const password = randomBytes(12).toString('hex')
  const redisPort = await startTlsRedis(
    lab,
    dir,
    { cert: redisFiles.certFile, key: redisFiles.keyFile, ca: root.caFile },
    `user hz-agent on >${password} ~* &* +@all`,
  )
  const connection = {
    host: '127.0.0.1',
    port: redisPort,
    username: 'hz-agent',
    password,
    tls: controller,
    maxRetriesPerRequest: null,
  }
  const queue = new Queue(agentQueueName(lab.dpuId), { connection, prefix: lab.queuePrefix })
  const events = new QueueEvents(agentQueueName(lab.dpuId), {
    connection,
    prefix: lab.queuePrefix,
  })
  const admin = new Redis(connection)
  lab.later(async () => {
    await Promise.all([queue.close(), events.close()])
    admin.disconnect()
  })
  await events.waitUntilReady()

  // The group's SB over TLS, admitting the CA's client certificates.
  const sbFiles = await root.writeIssued(
    'ovn-sb',
    await root.issueServer({ commonName: 'ovn-sb', ips: [lab.fabric.gatewayIp] }),
  )
  const central = await startSslCentral(lab, {
    ca: root.caFile,
    cert: sbFiles.certFile,
    key: sbFiles.keyFile,
  })
  const group = lab.input.group.name
  const port = lab.input.host.logicalPort
  await central.nbctl('ls-add', group)
  await central.nbctl('lsp-add', group, port, '--', 'lsp-set-addresses', port, lab.input.host.mac)
  await central.nbctl('--wait=sb', 'sync')

  // The first identity is valid for 20 s only: once it has expired, Redis and the SB
  // admit the agent only with the renewed one.
  const first = await root.issueIdentity({ commonName: lab.dpuId, days: 20 / 86_400 })
  const expires = Date.parse(new X509Certificate(first.cert).validTo)
  const id = {
    cert: join(dir, 'dpu.crt'),
    key: join(dir, 'dpu.key'),
    server: join(dir, 'dpu-server.crt'),
  }
  const place = async (identity: { cert: string; key: string; serverCert: string }) => {
    await writeFile(id.key, identity.key, { mode: 0o600 })
    await writeFile(id.cert, identity.cert)
    await writeFile(id.server, identity.serverCert)
  }
  await place(first)
  const logs: string[] = []
  const runtime = await startAgentRuntime(
    lab.config({
      redisUrl: `rediss://hz-agent:${password}@127.0.0.1:${redisPort}`,
      redisCa: root.caFile,
      tlsCert: id.cert,
      tlsKey: id.key,
      tlsCa: root.caFile,
      tlsServerCert: id.server,
      tlsReloadMs: 200,
    }),
    (line) => logs.push(line),
  )
  lab.later(() => runtime.stop())
  const heartbeatIdentity = async () =>
    (await new Heartbeats(admin).read(lab.dpuId))?.identity ?? ''
  const configure = async (specVersion: number) => {
    const payload = buildConfigurePayload('2.0', {
      ...lab.input,
      specVersion,
      group: { name: group, sbRemote: central.remote },
    })
    const job = await queue.add('configure', payload, { jobId: `configure-renewal-${specVersion}` })
    return job.waitUntilFinished(events, 40_000)
  }
  t.match(await configure(1), { ovnInstalled: true }, 'bound with the first identity')
  const runDir = lab.config().runDir
  const pidFile = join(runDir, 'ovn-controller.pid')
  const args = (await processesMentioning(pidFile)).join('\n')
  t.match(args, `--private-key=${join(runDir, 'sb-client.key')}`, "ovn-controller's own key file")
  t.equal(await pemOf(join(runDir, 'sb-client.key')), first.key)
  const pidBefore = (await pemOf(pidFile)).trim()

  // Renewed with a new key, its certificate written first: until the key follows, the
  // files disagree and the identity in use stays.
  const renewed = await root.issueIdentity({ commonName: lab.dpuId })
  await writeFile(id.cert, renewed.cert)
  t.ok(
    await eventually(
      async () => logs.some((l) => /not taken.*is not the key of --tls-cert/.test(l)),
      10_000,
    ),
    'a half-renewed identity is not taken, saying why',
  )
  t.equal(await heartbeatIdentity(), first.cert, 'the heartbeat still presents the first')
  await place(renewed)

  t.ok(
    await eventually(async () => (await heartbeatIdentity()) === renewed.cert, 10_000),
    'the heartbeat presents the renewed identity, for the controller to record',
  )
  const served = await new Promise<Buffer>((resolve, reject) => {
    const at = runtime.grpcAddress.lastIndexOf(':')
    const host = runtime.grpcAddress.slice(0, at)
    const p = runtime.grpcAddress.slice(at + 1)
    const socket = tlsConnect(
      { host, port: Number(p), ...controller, ALPNProtocols: ['h2'], rejectUnauthorized: false },
      () => {
        resolve(socket.getPeerCertificate().raw)
        socket.destroy()
      },
    )
    socket.on('error', reject)
  })
  t.same(served, new X509Certificate(renewed.serverCert).raw, 'gRPC serves with it')
  t.ok(
    await eventually(
      async () => (await pemOf(pidFile).catch(() => pidBefore)).trim() !== pidBefore,
      10_000,
    ),
    'ovn-controller restarted with it',
  )
  t.equal(await pemOf(join(runDir, 'sb-client.crt')), renewed.cert)
  t.equal(await pemOf(join(runDir, 'sb-client.key')), renewed.key)
  t.ok(
    await eventually(async () => (await runtime.agent.observe()).ovnController.connected, 20_000),
    'and is connected to the SB again',
  )

  // Once the first identity has expired, every Redis connection is dropped: the agent's
  // reconnect must present the renewed one.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expires - Date.now() + 1000)))
  await admin.call('CLIENT', 'KILL', 'USER', 'hz-agent', 'SKIPME', 'yes')
  t.match(await configure(2), { ovnInstalled: true }, 'a job after the first expired: acked')
  t.equal(
    (await central.sbctl('--bare', '--columns=name', 'list', 'Chassis')).trim(),
    lab.dpuId,
    'the SB knows the chassis',
  )
})

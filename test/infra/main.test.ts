import { execFile, spawn } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { chmod, cp, readFile, stat, symlink } from 'node:fs/promises'
import { request as httpsRequest } from 'node:https'
import { join } from 'node:path'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { eventually, processesMentioning, startMain } from '../helpers/processes.ts'
import { tempDir } from '../helpers/stack.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)

t.test('npm start: embedded stack, /readyz 200, Ctrl-C leaves no daemon', async (t) => {
  const dataDir = await tempDir(t)
  const port = await freePort()
  const grpcPort = await freePort()
  const metricsPort = await freePort()
  const main = startMain({
    HYDRAZINE_DATA_DIR: dataDir,
    HYDRAZINE_HTTP_PORT: String(port),
    HYDRAZINE_GRPC_PORT: String(grpcPort),
    HYDRAZINE_METRICS_LISTEN: `127.0.0.1:${metricsPort}`,
  })
  t.teardown(() => {
    main.child.kill('SIGKILL')
  })
  t.ok(await eventually(async () => main.output().includes('Hydrazine is up'), 60_000), 'it starts')
  t.match(main.output(), `http://127.0.0.1:${port}`, 'prints its URL')
  t.match(main.output(), `http://127.0.0.1:${metricsPort}/metrics`, 'and where metrics are')
  const scraped = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  t.match(scraped, /^# TYPE hydrazine_queue_jobs gauge$/m, 'the metrics listener answers')
  t.match(scraped, /^hydrazine_queue_jobs\{queue="hydrazine",state="waiting"\} \d+$/m)
  t.match(
    main.output(),
    `127.0.0.1:${grpcPort} (hydrazine.v1.HydrazineService)`,
    'and its gRPC address',
  )
  t.ok(await canConnect({ port: grpcPort }), 'the gRPC API listens')
  t.match(main.output(), `${dataDir}/operator-token`, 'prints where the operator token lives')
  const token = await readFile(`${dataDir}/operator-token`, 'utf8')
  t.match(token, /^[0-9a-f]{64}\n$/, 'an operator token was generated')

  const health = await fetch(`http://127.0.0.1:${port}/healthz`)
  t.equal(health.status, 200)
  const readyz = await fetch(`http://127.0.0.1:${port}/readyz`)
  t.equal(readyz.status, 200)
  t.same(await readyz.json(), {
    status: 'ready',
    checks: { redis: 'ok', agentsRedis: 'ok', ovnNb: 'ok' },
  })
  t.ok((await processesMentioning(dataDir)).length >= 7, 'its daemons run')

  const api = `http://127.0.0.1:${port}/v1/resource-groups/group-a`
  const auth = { authorization: `Bearer ${token.trim()}`, 'content-type': 'application/json' }
  t.equal((await fetch(api)).status, 401, 'the API wants a token')
  const put = await fetch(api, {
    method: 'PUT',
    headers: auth,
    body: JSON.stringify({
      tenantId: 'tenant-a',
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
    }),
  })
  t.equal(put.status, 202, 'a resource group is accepted with the operator token')
  const ready = await eventually(async () => {
    const got = (await (await fetch(api, { headers: auth })).json()) as {
      status?: { phase?: string }
    }
    return got.status?.phase === 'Ready'
  }, 20_000)
  t.ok(ready, 'the workers converge it to Ready')

  main.child.kill('SIGINT')
  t.equal(await main.exited, 0, 'exits cleanly on SIGINT')
  const gone = await eventually(async () => (await processesMentioning(dataDir)).length === 0, 5000)
  t.ok(gone, 'no ovsdb-server, redis-server or FRR daemon of it still runs')
})

t.test('bad configuration stops start-up with the variable named', async (t) => {
  const main = startMain({ HYDRAZINE_HTTP_PORT: 'eighty' })
  t.equal(await main.exited, 2)
  t.match(main.output(), /HYDRAZINE_HTTP_PORT: must be a port number/)
})

t.test('npm start from a checkout below a private (0700) directory', async (t) => {
  // As `cd ~ && git clone … && npm start` as root does: /root is mode 0700.
  const privateDir = await tempDir(t)
  await chmod(privateDir, 0o700)
  const checkout = join(privateDir, 'hydrazine')
  // The files a clone would have, as they are in this working tree.
  const { stdout } = await run(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      cwd: repo,
    },
  )
  for (const file of stdout.split('\0').filter(Boolean)) {
    await cp(join(repo, file), join(checkout, file), { preserveTimestamps: true })
  }
  // The dependencies this checkout already has, instead of a second `npm install`.
  await symlink(join(repo, 'node_modules'), join(checkout, 'node_modules'))

  const port = await freePort()
  const child = spawn('npm', ['start'], {
    cwd: checkout,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      HYDRAZINE_HTTP_PORT: String(port),
      HYDRAZINE_GRPC_PORT: String(await freePort()),
      HYDRAZINE_METRICS_LISTEN: 'off',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let output = ''
  for (const stream of [child.stdout, child.stderr]) {
    stream.on('data', (c: Buffer) => {
      output += c.toString()
    })
  }
  let running = true
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      running = false
      r(code)
    }),
  )
  const group = (signal: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, signal)
    } catch {}
  }
  t.teardown(() => group('SIGKILL'))

  const up = await eventually(
    async () => output.includes('Hydrazine is up') || !running,
    90_000,
  ).then(() => output.includes('Hydrazine is up'))
  t.ok(up, 'it starts')
  if (!up) t.comment(output)
  t.match(output, join(checkout, '.hydrazine'), 'with its data in the checkout')
  const readyz = await fetch(`http://127.0.0.1:${port}/readyz`)
  t.equal(readyz.status, 200, 'Redis and the OVN central answer')
  t.equal((await stat(privateDir)).mode & 0o777, 0o700, 'the private directory stays private')

  // Ctrl-C in a terminal signals the whole foreground group: npm, tsx and Hydrazine.
  group('SIGINT')
  await exited
  const groupGone = await eventually(async () => {
    const { stdout: ps } = await run('ps', ['-eo', 'pgid='])
    return !ps.split('\n').some((pgid) => Number(pgid) === child.pid)
  }, 10_000)
  t.ok(groupGone, 'Ctrl-C stops npm and Hydrazine')
  const gone = await eventually(
    async () => (await processesMentioning(checkout)).length === 0,
    5000,
  )
  t.ok(gone, 'and every daemon it started')
})

t.test('HTTPS and gRPC over TLS with HYDRAZINE_TLS_CERT and HYDRAZINE_TLS_KEY', async (t) => {
  const dataDir = await tempDir(t)
  const ca = await openCertificateAuthority(join(await tempDir(t), 'pki'))
  const files = await ca.writeIssued('api', await ca.issueServer({ ips: ['127.0.0.1'] }))
  const port = await freePort()
  const grpcPort = await freePort()
  const main = startMain({
    HYDRAZINE_DATA_DIR: dataDir,
    HYDRAZINE_HTTP_PORT: String(port),
    HYDRAZINE_GRPC_PORT: String(grpcPort),
    HYDRAZINE_TLS_CERT: files.certFile,
    HYDRAZINE_TLS_KEY: files.keyFile,
  })
  t.teardown(() => {
    main.child.kill('SIGKILL')
  })
  t.ok(await eventually(async () => main.output().includes('Hydrazine is up'), 60_000), 'it starts')
  t.match(main.output(), `https://127.0.0.1:${port}`, 'prints an https:// URL')

  const served = new X509Certificate(await readFile(files.certFile)).fingerprint256
  const health = await httpsGet(`https://127.0.0.1:${port}/healthz`, ca.caCert)
  t.equal(health.status, 200, 'HTTPS answers')
  t.equal(health.fingerprint, served, 'with the certificate it was given')
  t.equal(await plainHttpStatus(port), 'refused', 'plain HTTP gets no answer on that port')

  const grpcCert = await tlsPeerCertificate(grpcPort, ca.caCert)
  t.equal(grpcCert, served, 'gRPC speaks TLS with the same certificate')
  main.child.kill('SIGINT')
  t.equal(await main.exited, 0)
})

t.test('a non-loopback HTTP host without certificates refuses to start, in one line', async (t) => {
  const main = startMain({ HYDRAZINE_HTTP_HOST: '0.0.0.0', HYDRAZINE_DATA_DIR: await tempDir(t) })
  t.equal(await main.exited, 2)
  const lines = main.output().trim().split('\n')
  t.equal(lines.length, 1, 'one line')
  t.match(
    lines[0],
    /^hydrazine: invalid configuration: HYDRAZINE_HTTP_HOST: 0\.0\.0\.0 is not loopback: serving the API there needs HYDRAZINE_TLS_CERT and HYDRAZINE_TLS_KEY/,
  )
})

/** GET over HTTPS trusting `ca`: the status and the SHA-256 fingerprint of the server's cert. */
function httpsGet(url: string, ca: string): Promise<{ status: number; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** What a plaintext HTTP request to `port` gets: a status, or 'refused' when it fails. */
async function plainHttpStatus(port: number): Promise<number | 'refused'> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz`)).status
  } catch {
    return 'refused'
  }
}

/** The SHA-256 fingerprint of the certificate a TLS server on `port` presents (verified). */
function tlsPeerCertificate(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['h2'] }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256
      socket.destroy()
      resolve(fingerprint)
    })
    socket.on('error', reject)
  })
}

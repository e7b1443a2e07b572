import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { tempDir } from '../helpers/stack.ts'

const main = fileURLToPath(new URL('../../infra/main.ts', import.meta.url))

function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (c: Buffer) => {
    output += c.toString()
  })
  child.stderr.on('data', (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  return { child, exited, output: () => output }
}

t.test('npm start: embedded stack, /readyz 200, Ctrl-C leaves no daemon', async (t) => {
  const dataDir = await tempDir(t)
  const port = await freePort()
  const grpcPort = await freePort()
  const main = startMain({
    HYDRAZINE_DATA_DIR: dataDir,
    HYDRAZINE_HTTP_PORT: String(port),
    HYDRAZINE_GRPC_PORT: String(grpcPort),
  })
  t.teardown(() => {
    main.child.kill('SIGKILL')
  })
  t.ok(await eventually(async () => main.output().includes('Hydrazine is up'), 60_000), 'it starts')
  t.match(main.output(), `http://127.0.0.1:${port}`, 'prints its URL')
  t.match(main.output(), `127.0.0.1:${grpcPort} (hydrazine.v1.Hydrazine)`, 'and its gRPC address')
  t.ok(await canConnect({ port: grpcPort }), 'the gRPC API listens')
  t.match(main.output(), `${dataDir}/operator-token`, 'prints where the operator token lives')
  const token = await readFile(`${dataDir}/operator-token`, 'utf8')
  t.match(token, /^[0-9a-f]{64}\n$/, 'an operator token was generated')

  const health = await fetch(`http://127.0.0.1:${port}/healthz`)
  t.equal(health.status, 200)
  const readyz = await fetch(`http://127.0.0.1:${port}/readyz`)
  t.equal(readyz.status, 200)
  t.same(await readyz.json(), { status: 'ready', checks: { redis: 'ok', ovnNb: 'ok' } })
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

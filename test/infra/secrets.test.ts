/**
 * Secrets stay secret: the Redis password and the operator token never appear in a log
 * line (Hydrazine's own, or a daemon's under the data dir), in an error, or in an answer
 * of the HTTP API.
 */
import { spawn } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import t from 'tap'
import { createLogger } from '../../infra/logger.ts'
import { freePort } from '../../lib/process/ports.ts'
import { redactRedisUrl, redisOptions } from '../../lib/redis/connection.ts'
import { eventually } from '../helpers/processes.ts'
import { tempDir, withStack } from '../helpers/stack.ts'

const main = fileURLToPath(new URL('../../infra/main.ts', import.meta.url))

t.test(
  'npm start at debug level: no password or token in any log line or /v1 answer',
  async (t) => {
    const dataDir = await tempDir(t)
    const port = await freePort()
    const child = spawn(process.execPath, ['--import', 'tsx', main], {
      env: {
        ...process.env,
        LOG_LEVEL: 'debug',
        HYDRAZINE_DATA_DIR: dataDir,
        HYDRAZINE_HTTP_PORT: String(port),
        HYDRAZINE_GRPC_PORT: String(await freePort()),
        HYDRAZINE_METRICS_LISTEN: 'off',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    t.teardown(() => {
      child.kill('SIGKILL')
    })
    let output = ''
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (c: Buffer) => {
        output += c.toString()
      })
    }
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    t.ok(await eventually(async () => output.includes('Hydrazine is up'), 60_000), 'it starts')

    const password = (await readFile(join(dataDir, 'redis', 'password'), 'utf8')).trim()
    const token = (await readFile(join(dataDir, 'operator-token'), 'utf8')).trim()
    const agentsPassword = (
      await readFile(join(dataDir, 'agents-redis', 'password'), 'utf8')
    ).trim()
    t.match(password, /^[0-9a-f]{64}$/)
    t.match(agentsPassword, /^[0-9a-f]{64}$/)
    t.not(agentsPassword, password, "the agents' Redis has a password of its own")
    t.match(
      output,
      /Redis:\s+redis:\/\/default:\*\*\*@127\.0\.0\.1:\d+/,
      'the Redis URL is printed redacted',
    )

    const base = `http://127.0.0.1:${port}`
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    const answers: string[] = []
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: auth,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      answers.push(`${method} ${path} ${res.status} ${await res.text()}`)
    }
    await call('PUT', '/v1/resource-groups/group-a', {
      tenantId: 'tenant-a',
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
    })
    await call('PUT', '/v1/dpus/dpu-a', { tenantId: 'tenant-a', fabricIps: ['172.18.0.5'] })
    await call('PUT', '/v1/resource-groups/bad', { tenantId: 7 })
    for (const path of [
      '/v1/resource-groups',
      '/v1/resource-groups/group-a',
      '/v1/dpus',
      '/v1/public-ips',
      '/v1/openapi.json',
      '/readyz',
      '/healthz',
    ]) {
      await call('GET', path)
    }
    child.kill('SIGINT')
    t.equal(await exited, 0, 'exits cleanly')

    t.ok(output.split('\n').length > 10, `${output.split('\n').length} lines captured`)
    for (const [name, secret] of [
      ['the Redis password', password],
      ["the agents' Redis password", agentsPassword],
      ['the operator token', token],
    ] as const) {
      t.notOk(output.includes(secret), `${name} is in no line of Hydrazine's output`)
      t.notOk(
        answers.some((a) => a.includes(secret)),
        `${name} is in no API answer (${answers.length})`,
      )
      const logs = await daemonLogs(dataDir)
      const leaking = logs.filter((l) => l.text.includes(secret)).map((l) => l.file)
      t.same(leaking, [], `${name} is in none of the ${logs.length} daemon logs under the data dir`)
    }
  },
)

/** The process logger at debug level, writing into `lines` (one JSON line each). */
function capturedLogger() {
  const lines: string[] = []
  const logger = createLogger(
    'debug',
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk))
        done()
      },
    }),
  )
  return { lines, logger }
}

t.test('a Redis error logged at debug level carries no password', async (t) => {
  const stack = await withStack(t)
  if (!stack.redis) throw new Error('stack without redis')
  const { lines, logger } = capturedLogger()
  const wrong = 'wrong-password-0123456789abcdef'
  const url = stack.redis.url.replace(/:[0-9a-f]{64}@/, `:${wrong}@`)
  const client = new Redis({
    ...redisOptions({ url }),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  const errors: unknown[] = []
  client.on('error', (error: unknown) => {
    errors.push(error)
    logger.debug({ err: error }, 'redis connection error')
  })
  const failed = await client.connect().catch((error: unknown) => error)
  logger.error({ err: failed }, 'start-up failed')
  client.disconnect()
  t.ok(errors.length + (failed ? 1 : 0) > 0, 'the wrong password was refused')
  const carried = [...errors, failed].some((e) => JSON.stringify(e ?? {}).includes(wrong))
  t.comment(`the raw error ${carried ? 'carries' : 'does not carry'} the password`)
  t.ok(lines.length > 0, `${lines.length} log lines`)
  t.notOk(lines.join('').includes(wrong), 'no log line carries the password')
  t.equal(
    redactRedisUrl(stack.redis.url),
    stack.redis.url.replace(/:[0-9a-f]{64}@/, ':***@'),
    'a URL for a log is redacted',
  )
  t.notMatch(String(failed), wrong, 'nor does the error message')
})

t.test(
  'an ioredis error with the failed AUTH command is logged without its arguments',
  async (t) => {
    const { lines, logger } = capturedLogger()
    // What ioredis attaches to a failed command (DataHandler.returnError, abortError).
    const error = Object.assign(new Error('WRONGPASS invalid username-password pair'), {
      command: { name: 'auth', args: ['default', 'p4ssw0rd-secret'] },
    })
    const wrapped = new Error('start-up failed', { cause: error })
    logger.error({ err: error }, 'redis error')
    logger.error({ err: wrapped }, 'wrapped')
    const text = lines.join('')
    t.notOk(text.includes('p4ssw0rd-secret'), 'the password is not logged')
    t.match(JSON.parse(lines[0] ?? '{}'), {
      err: { command: { name: 'auth', args: '[redacted]' } },
    })
    t.equal(error.command.args[1], 'p4ssw0rd-secret', 'the error itself is left as it was')
  },
)

/** Every daemon log and output file under `dir` (recursively). */
async function daemonLogs(dir: string): Promise<{ file: string; text: string }[]> {
  const out: { file: string; text: string }[] = []
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !/\.(log|out)$/.test(entry.name)) continue
    const file = join(entry.parentPath ?? entry.path, entry.name)
    out.push({ file, text: await readFile(file, 'utf8').catch(() => '') })
  }
  return out
}

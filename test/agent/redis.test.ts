/**
 * The agent process (`agent/main.ts`) reaches a TLS Redis (`rediss://user:password@…`,
 * a private CA, the DPU's client certificate), and the password appears in none of what it
 * prints: not the configuration it logs at start-up, not a refused password, a Redis that
 * is down or a certificate it cannot verify.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import t from 'tap'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { type AgentLab, agentArgs, startAgentLab, startTlsRedis } from './fixture.ts'
import { makeCa } from './pki.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Runs the agent process with `REDIS_URL` from the environment until its log matches
 * `until` and `also` holds (or it exits, or 20 s pass), stops it, and returns everything
 * it printed and whether it got there.
 */
async function agentOutput(
  lab: AgentLab,
  args: readonly string[],
  redisUrl: string,
  until: RegExp,
  name: string,
  also: () => Promise<boolean> = async () => true,
): Promise<{ out: string; reached: boolean }> {
  const logFile = join(lab.dataDir, `agent-${name}.out`)
  await writeFile(logFile, '')
  const printed = () => readFile(logFile, 'utf8').catch(() => '')
  const agent = await startDaemon({
    name: `agent(${name})`,
    command: process.execPath,
    args: ['--import', 'tsx', 'agent/main.ts', ...args],
    env: { REDIS_URL: redisUrl },
    cwd: repo,
    logFile,
    ready: async () => until.test(await printed()) && (await also()),
    readyTimeoutMs: 20_000,
  }).catch(() => undefined)
  await agent?.stop()
  return { out: await printed(), reached: agent !== undefined }
}

t.test('rediss:// with a private CA; the password is in no log line', async (t) => {
  const lab = await startAgentLab(t)
  const dir = join(lab.dataDir, 'redis-tls')
  await mkdir(dir)
  const ca = await makeCa(dir, 'hydrazine-ca')
  const server = await ca.issue('redis')
  const dpuCert = await ca.issue(lab.dpuId)

  // Percent-encoded in the URL; a log must show neither form.
  const secret = `Pw/${randomBytes(6).toString('hex')}:@x`
  const hidden = [secret, encodeURIComponent(secret), secret.slice(3, 15)]
  const port = await startTlsRedis(
    lab,
    dir,
    { cert: server.cert, key: server.key, ca: ca.ca },
    `user hz-agent on >${secret} ~* &* +@all`,
  )
  const url = (password: string, p = port) =>
    `rediss://hz-agent:${encodeURIComponent(password)}@127.0.0.1:${p}`
  const pem = (path: string) => readFile(path, 'utf8')
  const reader = new Redis(url(secret), {
    tls: { ca: await pem(ca.ca), cert: await pem(dpuCert.cert), key: await pem(dpuCert.key) },
  })
  lab.later(async () => reader.disconnect())

  // The DPU's identity from this Redis's CA: the lab's server certificate is for another
  // key, so the agent serves with its identity (as an agent from before server
  // certificates does).
  const { tlsServerCert: _otherKey, ...config } = lab.config({
    redisUrl: url(secret),
    redisCa: ca.ca,
    tlsCert: dpuCert.cert,
    tlsKey: dpuCert.key,
    tlsCa: ca.ca,
  })
  const args = agentArgs(config, ['redisUrl'])
  const cases: [string, string, string[], RegExp, RegExp][] = [
    ['up', url(secret), args, /ready: queue/, /ready: queue agent-/],
    ['a refused password', url(`${secret}-x`), args, /WRONGPASS|NOAUTH/, /WRONGPASS|NOAUTH/],
    ['Redis down', url(secret, await freePort()), args, /ECONNREFUSED/, /redis: .*ECONNREFUSED/],
    [
      'an unknown CA',
      url(secret),
      agentArgs(config, ['redisUrl', 'redisCa']),
      /certificate/,
      /redis: .*certificate/,
    ],
  ]
  // Up: ready once its heartbeat is in Redis, written over TLS with the DPU's certificate.
  const beating = async () => (await new Heartbeats(reader).read(lab.dpuId)) !== undefined
  for (const [what, redisUrl, agentFlags, until, says] of cases) {
    const { out, reached } = await agentOutput(
      lab,
      agentFlags,
      redisUrl,
      until,
      what.replace(/\W+/g, '-'),
      what === 'up' ? beating : undefined,
    )
    if (what === 'up') t.ok(reached, 'the agent heartbeats over TLS with its certificate')
    t.match(out, says, `${what}: says why`)
    t.match(
      out,
      /redis-url=rediss:\/\/hz-agent:\*\*\*@127\.0\.0\.1:\d+/,
      `${what}: the config, redacted`,
    )
    for (const h of hidden) t.notMatch(out, h, `${what}: no password`)
  }
})

import { request as httpsRequest } from 'node:https'
import { join } from 'node:path'
import { Counter, Registry } from 'prom-client'
import t from 'tap'
import { ConfigError } from '../errors.ts'
import { openCertificateAuthority } from '../pki/index.ts'
import { parseMetricsListen, serveMetrics } from './server.ts'

const TOKEN = 'metrics-token-0123456789'

function registryWithOneCounter(): Registry {
  const registry = new Registry()
  new Counter({ name: 'hydrazine_test_total', help: 'a test counter', registers: [registry] }).inc(
    3,
  )
  return registry
}

t.test('listener addresses: host:port, [v6]:port or off', async (t) => {
  const cases: [string, ReturnType<typeof parseMetricsListen>][] = [
    ['127.0.0.1:9464', { host: '127.0.0.1', port: 9464 }],
    ['[::1]:0', { host: '::1', port: 0 }],
    ['localhost:9100', { host: 'localhost', port: 9100 }],
    ['off', 'off'],
    ['9464', undefined],
    ['127.0.0.1:', undefined],
    ['127.0.0.1:65536', undefined],
    ['::1:9464', undefined],
    ['', undefined],
  ]
  for (const [text, parsed] of cases) t.same(parseMetricsListen(text), parsed, text || '(empty)')
})

t.test('on loopback: plaintext, open unless a token is set', async (t) => {
  const open = await serveMetrics({
    registry: registryWithOneCounter(),
    listen: { host: '127.0.0.1', port: 0 },
  })
  t.teardown(() => open.close())
  t.match(open.url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
  const res = await fetch(open.url)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  t.match(await res.text(), /^hydrazine_test_total 3$/m)
  t.equal((await fetch(open.url.replace('/metrics', '/'))).status, 404, 'only /metrics')
  t.equal((await fetch(open.url, { method: 'POST' })).status, 405, 'only GET and HEAD')

  const guarded = await serveMetrics({
    registry: registryWithOneCounter(),
    listen: { host: '127.0.0.1', port: 0 },
    token: TOKEN,
  })
  t.teardown(() => guarded.close())
  const cases: [string, Record<string, string>, number][] = [
    ['no token', {}, 401],
    ['another token', { authorization: 'Bearer metrics-token-9876543210' }, 401],
    ['not a bearer token', { authorization: `Basic ${TOKEN}` }, 401],
    ['the token', { authorization: `Bearer ${TOKEN}` }, 200],
  ]
  for (const [name, headers, status] of cases) {
    const answer = await fetch(guarded.url, { headers })
    t.equal(answer.status, status, name)
    if (status === 401) t.match(answer.headers.get('www-authenticate'), /^Bearer /)
  }
})

t.test('off loopback: refused without a token and TLS', async (t) => {
  const registry = registryWithOneCounter()
  for (const extra of [{}, { token: TOKEN }, { tls: { cert: 'c', key: 'k' } }]) {
    await t.rejects(
      serveMetrics({ registry, listen: { host: '0.0.0.0', port: 0 }, ...extra }),
      ConfigError,
      `with ${Object.keys(extra).join(' ') || 'neither'}`,
    )
  }
})

t.test('with TLS: HTTPS, and the token required', async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const issued = await ca.issueServer({ ips: ['127.0.0.1'] })
  const server = await serveMetrics({
    registry: registryWithOneCounter(),
    listen: { host: '127.0.0.1', port: 0 },
    token: TOKEN,
    tls: { cert: issued.cert, key: issued.key },
  })
  t.teardown(() => server.close())
  t.match(server.url, /^https:\/\//)
  const get = (headers: Record<string, string>) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(server.url, { ca: ca.caCert, headers }, (res) => {
        let body = ''
        res.on('data', (c: Buffer) => {
          body += c.toString()
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on('error', reject)
      req.end()
    })
  t.equal((await get({})).status, 401)
  const ok = await get({ authorization: `Bearer ${TOKEN}` })
  t.equal(ok.status, 200)
  t.match(ok.body, /^hydrazine_test_total 3$/m)
})

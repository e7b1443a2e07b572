/**
 * `hz` against a running system: the pipeline with an agent, behind the HTTP API on a free
 * port. The first and a failing call run the real binary (`infra/cli/bin.mjs`, as `npx hz`
 * runs it: its output and exit code); the others run the same `runCli` in this process,
 * sparing a Node and tsx start each.
 */
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { serve } from '@hono/node-server'
import t from 'tap'
import { createGrpcServer } from '../../api/grpc/server.ts'
import { createApp } from '../../api/http/app.ts'
import { runCli } from '../../infra/cli/main.ts'
import { tempDir } from '../helpers/stack.ts'
import { groupSpec, hostSpec, startPipeline, until } from '../pipeline/fixtures.ts'

const bin = fileURLToPath(new URL('../../infra/cli/bin.mjs', import.meta.url))
const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT_B = 'tenant-b-token-0123456789abcdef'

interface Run {
  readonly code: number
  readonly out: string
  readonly err: string
}

t.test('hz against a running Hydrazine', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const app = createApp({
    readiness: { redis: async () => (await p.controller.redis.ping()) === 'PONG' },
    v1: {
      client: p.client,
      tokens: { operator: [OPERATOR], tenants: { 'tenant-b': [TENANT_B] } },
    },
  })
  const grpcIngress = createGrpcServer({
    client: p.client,
    tokens: { operator: [OPERATOR], tenants: { 'tenant-b': [TENANT_B] } },
  })
  const grpcPort = await grpcIngress.bind('127.0.0.1:0')
  t.teardown(() => grpcIngress.close())
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 })
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  await new Promise<void>((r) => server.once('listening', () => r()))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dir = await tempDir(t)
  const tokenFile = join(dir, 'token')
  await writeFile(tokenFile, `${OPERATOR}\n`)

  const environment = (env: Record<string, string>) => ({
    ...process.env,
    HYDRAZINE_URL: url,
    HYDRAZINE_TOKEN_FILE: tokenFile,
    ...env,
  })
  const binary = (args: string[], env: Record<string, string> = {}) =>
    new Promise<Run>((resolve) => {
      execFile(process.execPath, [bin, ...args], { env: environment(env) }, (error, out, err) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
      )
    })
  const hz = async (args: string[], env: Record<string, string> = {}): Promise<Run> => {
    let out = ''
    let err = ''
    const code = await runCli(args, {
      env: environment(env),
      out: (text) => {
        out += `${text}\n`
      },
      err: (text) => {
        err += `${text}\n`
      },
    })
    return { code, out, err }
  }
  const json = async (args: string[]) => {
    const r = await hz([...args, '--json'])
    if (r.code !== 0) throw new Error(`hz ${args.join(' ')}: ${r.err}`)
    return JSON.parse(r.out) as unknown
  }

  const specs = join(dir, 'specs.json')
  await writeFile(
    specs,
    JSON.stringify([
      { kind: 'ResourceGroup', name: 'cli-group', spec: groupSpec('tenant-a') },
      { kind: 'ManagedResource', name: 'cli-host', spec: hostSpec('cli-group', 'dpu-1', 7) },
    ]),
  )
  // A plan first: what would change, and nothing does. (Each document is planned against
  // what is stored now: a host's plan needs its group stored.)
  const groupOnly = join(dir, 'group.json')
  await writeFile(
    groupOnly,
    JSON.stringify({ kind: 'ResourceGroup', name: 'cli-group', spec: groupSpec('tenant-a') }),
  )
  const planned = await binary(['plan', '-f', groupOnly])
  t.equal(planned.code, 0, planned.err)
  t.match(
    planned.out,
    /resource-groups\/cli-group \(dry run\):\n {2}NB insert \d+: .*Logical_Switch\/ls/,
  )
  t.match(planned.out, /the group would be created \(version 1\)/)
  t.same(await json(['list', 'groups']), [], 'a plan creates nothing')

  const applied = await hz(['apply', '-f', specs])
  t.equal(applied.code, 0, applied.err)
  t.match(
    applied.out,
    /resource-groups\/cli-group: accepted\nmanaged-resources\/cli-host: accepted/,
  )
  const again = await hz(['apply', '-f', specs])
  t.match(again.out, /cli-group: unchanged/, 'the same specs again change nothing')

  const host = await until(
    () => json(['get', 'host', 'cli-host']),
    (h) => (h as { status?: { phase?: string } })?.status?.phase === 'Ready',
  )
  t.match(host, { name: 'cli-host', status: { phase: 'Ready', configsSynced: true } })

  const list = await hz(['list', 'hosts', '--group', 'cli-group'])
  t.equal(list.code, 0)
  const [header, row] = list.out.trim().split('\n')
  t.match(header, /^NAME\s+GROUP\s+DPU\s+IP\s+IPV6\s+ACCESS\s+PUBLIC IP\s+PHASE$/)
  t.match(row, /^cli-host\s+cli-group\s+dpu-1\s+10\.10\.10\.\d+\s+-\s+None\s+-\s+Ready$/)
  t.match(await json(['list', 'groups']), [{ name: 'cli-group' }])
  t.match(
    (await hz(['dpus'])).out,
    /\ndpu-1\s+\S+\s+tenant-a\s+1\s/,
    'the DPU, its tenant and host',
  )

  // The group's address map: counts, pools, the map in lines of 64 addresses, the holders.
  const ipam = await hz(['ipam', 'cli-group'])
  t.equal(ipam.code, 0, ipam.err)
  const { hostIP } = (host as { status: { hostAccessIPs: { hostIP: string } } }).status
    .hostAccessIPs
  t.match(
    ipam.out,
    /^network cli-group\n\nSUBNET +NAME +GATEWAY +DHCP +SIZE +USED +RESERVED +FREE\n10\.10\.10\.0\/24 +- +10\.10\.10\.1 +true +256 +1 +3 +252\n/,
  )
  t.match(
    ipam.out,
    /\nSUBNET +POOL +START +END +SIZE +USED +FREE\n10\.10\.10\.0\/24 +default +10\.10\.10\.1 /,
  )
  t.match(
    ipam.out,
    /\nmap of 10\.10\.10\.0\/24 \(\+ used, X reserved, \. free, - in no pool\):\n {2}10\.10\.10\.0 +XX[.+]{62}\n {2}10\.10\.10\.64 +[.+]{64}\n/,
    'the network address and the gateway reserved, then the pool',
  )
  t.match(
    ipam.out,
    new RegExp(`\\nIP +OWNER\\n(.*\\n)*${hostIP.replaceAll('.', '\\.')} +cli-host\\n`),
  )
  t.match(await json(['ipam', 'cli-group']), {
    network: 'cli-group',
    subnets: [{ cidr: '10.10.10.0/24', size: '256', mapFormat: 'address' }],
    allocations: [{ owner: 'cli-host', ip: hostIP }],
  })
  const strangerIpam = await hz(['ipam', 'cli-group'], { HYDRAZINE_TOKEN: TENANT_B })
  t.equal(strangerIpam.code, 1, "another tenant's group has no map to show")
  t.match(strangerIpam.err, /^hz: NOT_FOUND: /)

  const events = await hz(['events', 'host', 'cli-host'])
  t.match(events.out, /^TIME\s+TYPE\s+REASON\s+MESSAGE/)
  t.match(events.out, /Normal\s+Ready/, 'the host became Ready, as an event')
  t.match(events.out, /Normal\s+Created\s+spec version 1 stored\n$/, 'and, oldest, its creation')

  // The API's refusals: exit 1 with its code and the field it names.
  const badCidr = join(dir, 'bad.json')
  await writeFile(
    badCidr,
    JSON.stringify({
      kind: 'ResourceGroup',
      name: 'bad-group',
      spec: { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/33', gateway: '10.0.0.1' } },
    }),
  )
  const refused = await hz(['apply', '-f', badCidr])
  t.equal(refused.code, 1)
  t.match(refused.err, /^hz: INVALID: .*network\.cidr: must be a CIDR/)
  const stranger = await hz(['get', 'host', 'cli-host'], { HYDRAZINE_TOKEN: TENANT_B })
  t.equal(stranger.code, 1, "another tenant's token cannot read the host")
  t.match((await hz(['list', 'hosts'], { HYDRAZINE_TOKEN: TENANT_B })).out.trim(), /^NAME[^\n]*$/)
  const wrong = await binary(['list', 'groups'], {
    HYDRAZINE_TOKEN: 'not-a-token-0123456789abcdef',
  })
  t.equal(wrong.code, 1)
  t.match(wrong.err, /UNAUTHENTICATED/)
  t.equal((await hz(['list', 'groups'], { HYDRAZINE_URL: 'http://127.0.0.1:1' })).code, 1)
  const clear = await hz(['list', 'groups'], { HYDRAZINE_URL: 'http://192.0.2.10:8080' })
  t.equal(clear.code, 2, 'a plaintext URL off this machine is refused')
  t.match(clear.err, /token would travel in clear/)

  // Usage mistakes: exit 2 with the usage.
  for (const args of [
    [],
    ['frob'],
    ['get', 'host'],
    ['list', 'widgets'],
    ['apply'],
    ['ipam'],
    ['--nope'],
  ]) {
    const r = await hz(args)
    t.equal(r.code, 2, `hz ${args.join(' ')}: usage`)
    t.match(r.err + r.out, /usage: hz/)
  }
  const notADocument = join(dir, 'doc.json')
  await writeFile(notADocument, JSON.stringify({ kind: 'Widget', name: 'w' }))
  const badDoc = await hz(['apply', '-f', notADocument])
  t.equal(badDoc.code, 2)
  t.match(badDoc.err, /kind: must be ResourceGroup, ManagedResource, Dpu or PublicIp/)

  // The gRPC Watch stream until a new host is Ready.
  const watching = hz(['watch', 'host', 'cli-host2', '--until', 'Ready', '--timeout', '60'], {
    HYDRAZINE_GRPC: `127.0.0.1:${grpcPort}`,
  })
  await p.client.applyHost('cli-host2', hostSpec('cli-group', 'dpu-1', 8))
  const watched = await watching
  t.equal(watched.code, 0, watched.err)
  t.match(watched.out, /(ADDED|MODIFIED) {2}host\/cli-host2 {2}Ready\n$/, 'the last line: Ready')
  const never = await hz(['watch', 'host', 'nobody', '--until', 'Ready', '--timeout', '1'], {
    HYDRAZINE_GRPC: `127.0.0.1:${grpcPort}`,
  })
  t.equal(never.code, 1, 'a phase never reached: exit 1 after --timeout')
  t.match(never.out, /timed out waiting for Ready/)
  await p.client.deleteHost('cli-host2')

  const wouldDelete = await hz(['delete', 'host', 'cli-host', '--dry-run'])
  t.equal(wouldDelete.code, 0, wouldDelete.err)
  t.match(wouldDelete.out, /NB delete \d+: .*Logical_Switch_Port\/lsp\/hz\/cli-group\/cli-host/)
  t.match(wouldDelete.out, /agent dpu-1: isolate cli-host/)
  t.match(await json(['get', 'host', 'cli-host']), { status: { phase: 'Ready' } }, 'still there')

  const deleted = await hz(['delete', 'host', 'cli-host'])
  t.equal(deleted.code, 0, deleted.err)
  t.match(deleted.out, /managed-resources\/cli-host: deletion accepted/)
  await until(
    () => json(['list', 'hosts']),
    (items) => Array.isArray(items) && items.length === 0,
  )
  t.same(await json(['list', 'hosts']), [], 'the host is gone')
})

/**
 * `hz`: Hydrazine's command line, a client of the HTTP API.
 *
 *   hz list groups|hosts|dpus|public-ips [--group G] [--tenant T]
 *   hz get group|host|dpu|public-ip NAME
 *   hz apply -f FILE [--dry-run]   (JSON: {kind, name, spec} or a list of them)
 *   hz plan -f FILE                 (the same as a dry run: what would change)
 *   hz delete group|host|dpu|public-ip NAME [--force] [--dry-run]
 *   hz events group|host|dpu NAME [--limit N]
 *   hz ipam GROUP                   (the group's address map: subnets, pools, who holds what)
 *   hz trace FROM TO [--proto icmp|tcp|udp] [--port N] [--raw]
 *   hz watch [group|host] [NAME] [--until PHASE] [--timeout S]   (the gRPC Watch stream)
 *   hz dpus | hz public-ips   (short for `hz list …`)
 *
 * Reaches `--url` / `HYDRAZINE_URL` (default http://127.0.0.1:8080) with the token from
 * `--token` / `HYDRAZINE_TOKEN`, or the file `--token-file` / `HYDRAZINE_TOKEN_FILE`
 * (default `./.hydrazine/operator-token`, where `npm start` writes it). Tables for people,
 * `--json` for scripts. Exit codes: 0 done, 1 the API refused or could not be reached,
 * 2 usage.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import * as v from 'valibot'
import { isLoopback } from '../../lib/process/ports.ts'
import { type Api, ApiError, createApi } from './api.ts'
import { COLUMNS, ipamText, planText, summary, table, traceText } from './format.ts'
import { watch } from './watch.ts'

/** A mistake in how `hz` was called: exit code 2 with the usage. */
export class UsageError extends Error {}

const KINDS: Readonly<Record<string, string>> = {
  group: 'resource-groups',
  groups: 'resource-groups',
  'resource-group': 'resource-groups',
  'resource-groups': 'resource-groups',
  host: 'managed-resources',
  hosts: 'managed-resources',
  'managed-resource': 'managed-resources',
  'managed-resources': 'managed-resources',
  dpu: 'dpus',
  dpus: 'dpus',
  'public-ip': 'public-ips',
  'public-ips': 'public-ips',
}

const COMMANDS = new Set([
  'list',
  'dpus',
  'public-ips',
  'get',
  'delete',
  'apply',
  'plan',
  'events',
  'ipam',
  'trace',
  'watch',
])

/** What `hz apply -f` reads: one document or a list. */
const Document = v.object({
  kind: v.picklist(
    ['ResourceGroup', 'ManagedResource', 'Dpu', 'PublicIp'],
    'must be ResourceGroup, ManagedResource, Dpu or PublicIp',
  ),
  name: v.pipe(v.string(), v.minLength(1, 'must name the object')),
  spec: v.optional(v.record(v.string(), v.unknown())),
})

const PATH_OF_KIND: Readonly<Record<v.InferOutput<typeof Document>['kind'], string>> = {
  ResourceGroup: 'resource-groups',
  ManagedResource: 'managed-resources',
  Dpu: 'dpus',
  PublicIp: 'public-ips',
}

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  file: { type: 'string', short: 'f' },
  force: { type: 'boolean' },
  group: { type: 'string' },
  tenant: { type: 'string' },
  limit: { type: 'string' },
  proto: { type: 'string' },
  port: { type: 'string' },
  raw: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  grpc: { type: 'string' },
  until: { type: 'string' },
  timeout: { type: 'string' },
} as const

export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

/** Runs one `hz` command; resolves with its exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    })
    const [command, ...rest] = positionals
    if (values.help || command === undefined || command === 'help') {
      io.out(usage())
      return values.help || command === 'help' ? 0 : 2
    }
    if (!COMMANDS.has(command)) throw new UsageError(`unknown command '${command}'`)
    const url = urlOf(values.url, io.env)
    const token = tokenOf(values, io.env)
    if (command === 'watch') return await watchCommand(rest, values, url, token, io)
    const api = createApi({ url, token })
    const print = (value: unknown, human: () => string) =>
      io.out(values.json ? JSON.stringify(value, null, 2) : human())
    await run(api, command, rest, values, print)
    return 0
  } catch (error) {
    if (error instanceof UsageError || isParseArgsError(error)) {
      io.err(`hz: ${(error as Error).message}\n\n${usage()}`)
      return 2
    }
    if (error instanceof ApiError) {
      io.err(`hz: ${error.code}: ${error.message}`)
      return 1
    }
    throw error
  }
}

type Values = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>
>['values']

async function run(
  api: Api,
  command: string,
  args: readonly string[],
  values: Values,
  print: (value: unknown, human: () => string) => void,
): Promise<void> {
  switch (command) {
    case 'list':
    case 'dpus':
    case 'public-ips': {
      const kind = pathOf(command === 'list' ? args[0] : command)
      const items = await api.listAll(`/v1/${kind}`, {
        ...(kind === 'managed-resources' ? { resourceGroup: values.group } : {}),
        ...(kind === 'resource-groups' ? { tenant: values.tenant } : {}),
      })
      return print(items, () => table(items, COLUMNS[kind] ?? []))
    }
    case 'get': {
      const object = await api.request('GET', `/v1/${pathOf(args[0])}/${nameOf(args[1])}`)
      return print(object, () => summary(object))
    }
    case 'delete': {
      const kind = pathOf(args[0])
      const query = new URLSearchParams()
      if (values.force) query.set('force', 'true')
      if (values['dry-run']) query.set('dryRun', 'true')
      const qs = query.size > 0 ? `?${query}` : ''
      const answer = await api.request('DELETE', `/v1/${kind}/${nameOf(args[1])}${qs}`)
      const label = `${kind}/${args[1]}`
      return print(answer ?? {}, () =>
        values['dry-run'] ? planText(label, answer) : `${label}: deletion accepted`,
      )
    }
    case 'apply':
    case 'plan': {
      if (!values.file) throw new UsageError(`${command} needs -f FILE`)
      const dry = command === 'plan' || values['dry-run'] === true
      const answers: unknown[] = []
      const lines: string[] = []
      for (const doc of readDocuments(values.file)) {
        const label = `${PATH_OF_KIND[doc.kind]}/${doc.name}`
        const path = `/v1/${PATH_OF_KIND[doc.kind]}/${encodeURIComponent(doc.name)}${dry ? '?dryRun=true' : ''}`
        const answer = await api.request(
          'PUT',
          path,
          doc.kind === 'PublicIp' ? undefined : (doc.spec ?? {}),
        )
        answers.push(answer)
        const job = typeof answer === 'object' && answer !== null && 'jobId' in answer
        lines.push(dry ? planText(label, answer) : `${label}: ${job ? 'accepted' : 'unchanged'}`)
      }
      return print(answers.length === 1 ? answers[0] : answers, () => lines.join('\n'))
    }
    case 'events': {
      const kind = pathOf(args[0])
      if (kind === 'public-ips') throw new UsageError('public IPs have no events')
      const limit = values.limit ? `?limit=${encodeURIComponent(values.limit)}` : ''
      const answer = await api.request('GET', `/v1/${kind}/${nameOf(args[1])}/events${limit}`)
      const items =
        typeof answer === 'object' && answer !== null && 'items' in answer ? answer.items : []
      return print(items, () => table(Array.isArray(items) ? items : [], COLUMNS.events ?? []))
    }
    case 'ipam': {
      const [group] = args
      if (!group) throw new UsageError('ipam needs GROUP')
      const answer = await api.request(
        'GET',
        `/v1/resource-groups/${encodeURIComponent(group)}/ipam`,
      )
      return print(answer, () => ipamText(answer))
    }
    case 'trace': {
      const [from, to] = args
      if (!from || !to) throw new UsageError('trace needs FROM and TO')
      const query = new URLSearchParams({ from, to })
      if (values.proto) query.set('proto', values.proto)
      if (values.port) query.set('port', values.port)
      if (values.raw) query.set('raw', 'true')
      const answer = await api.request('GET', `/v1/trace?${query}`)
      return print(answer, () => traceText(answer))
    }
    default:
      throw new UsageError(`unknown command '${command}'`)
  }
}

async function watchCommand(
  args: readonly string[],
  values: Values,
  url: string,
  token: string,
  io: CliIo,
): Promise<number> {
  const [kind, name] = args
  const kinds = {
    group: 'OBJECT_KIND_RESOURCE_GROUP',
    host: 'OBJECT_KIND_MANAGED_RESOURCE',
  } as const
  const watched =
    kind === undefined ? undefined : kinds[kind.replace(/s$/, '') as keyof typeof kinds]
  if (kind !== undefined && !watched) throw new UsageError(`watch group or host, not '${kind}'`)
  if (values.until && !name) throw new UsageError('--until needs the object named')
  let timeoutMs: number | undefined
  if (values.timeout !== undefined) {
    timeoutMs = Number(values.timeout) * 1000
    if (!(timeoutMs > 0)) throw new UsageError('--timeout must be a number of seconds')
  }
  const parsed = new URL(url)
  const address = values.grpc ?? io.env.HYDRAZINE_GRPC ?? `${parsed.hostname}:8081`
  return watch({
    address,
    tls: parsed.protocol === 'https:',
    token,
    ...(watched ? { kind: watched } : {}),
    ...(name ? { name } : {}),
    ...(values.until ? { until: values.until } : {}),
    ...(timeoutMs ? { timeoutMs } : {}),
    json: values.json === true,
    out: io.out,
  })
}

function pathOf(kind: string | undefined): string {
  const path = kind === undefined ? undefined : KINDS[kind]
  if (!path)
    throw new UsageError(
      `name a kind: group, host, dpu or public-ip${kind ? ` (not '${kind}')` : ''}`,
    )
  return path
}

function nameOf(name: string | undefined): string {
  if (!name) throw new UsageError('name the object')
  return encodeURIComponent(name)
}

function readDocuments(file: string) {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file === '-' ? 0 : file, 'utf8'))
  } catch (error) {
    throw new UsageError(`cannot read ${file} as JSON: ${(error as Error).message}`)
  }
  const result = v.safeParse(v.array(Document), Array.isArray(parsed) ? parsed : [parsed])
  if (!result.success) {
    const path = (i: v.BaseIssue<unknown>) => {
      const at = v.getDotPath(i) ?? ''
      return Array.isArray(parsed) ? at : at.replace(/^\d+\.?/, '')
    }
    const issues = result.issues.map((i) => `${path(i) || '(document)'}: ${i.message}`)
    throw new UsageError(`${file}: ${issues.join('; ')}`)
  }
  return result.output
}

function urlOf(flag: string | undefined, env: CliIo['env']): string {
  const url = flag ?? env.HYDRAZINE_URL ?? 'http://127.0.0.1:8080'
  if (!/^https?:\/\/\S+$/.test(url))
    throw new UsageError(`--url / HYDRAZINE_URL must be http(s)://…, not '${url}'`)
  // The token travels in every request: in plaintext only to this machine.
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '')
  if (url.startsWith('http:') && !isLoopback(host)) {
    throw new UsageError(
      `${url} is plaintext off this machine: the token would travel in clear; use https://`,
    )
  }
  return url
}

function tokenOf(values: Values, env: CliIo['env']): string {
  const token = values.token ?? env.HYDRAZINE_TOKEN
  if (token) return token
  const file = values['token-file'] ?? env.HYDRAZINE_TOKEN_FILE ?? '.hydrazine/operator-token'
  try {
    const read = readFileSync(file, 'utf8').trim()
    if (read) return read
  } catch {
    // Named below.
  }
  throw new UsageError(
    `no token: pass --token, set HYDRAZINE_TOKEN, or point --token-file / HYDRAZINE_TOKEN_FILE at a readable file (tried ${file})`,
  )
}

function isParseArgsError(error: unknown): boolean {
  return (
    error instanceof TypeError &&
    typeof (error as { code?: unknown }).code === 'string' &&
    String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS')
  )
}

function usage(): string {
  return `usage: hz [--url URL] [--token T | --token-file F] [--json] COMMAND
  list groups|hosts|dpus|public-ips [--group G] [--tenant T]
  get group|host|dpu|public-ip NAME
  apply -f FILE [--dry-run]  JSON {kind, name, spec} or a list; kind: ResourceGroup,
                             ManagedResource, Dpu or PublicIp ('-' reads stdin)
  plan -f FILE               what apply would change (NB rows, FRR, agent jobs, addresses)
  delete group|host|dpu|public-ip NAME [--force] [--dry-run]
  events group|host|dpu NAME [--limit N]
  ipam GROUP                 the group's addresses: each subnet's used, reserved and free
                             counts, its pools and reservations, a map of every address
                             (+ used, X reserved, . free, - in no pool), who holds which
  trace FROM TO [--proto icmp|tcp|udp] [--port N] [--raw]
                             FROM a host or 'fabric'; TO a host or an IP
  watch [group|host] [NAME] [--until PHASE] [--timeout S]
                             status changes as they happen (gRPC, --grpc / HYDRAZINE_GRPC,
                             default the URL's host, port 8081); resumes after a drop
  dpus, public-ips           short for 'list dpus', 'list public-ips'
exit codes: 0 done, 1 refused or unreachable, 2 usage`
}

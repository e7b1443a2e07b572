/**
 * Fuzzes the HTTP `/v1` PUT routes with malformed and hostile bodies against the API on a
 * real Redis (`contract.ts`): every one must be refused with a 4xx JSON error and change
 * nothing — no object, public IP or job.
 *
 * The cases come from a seeded PRNG, so a failure is reproducible: the seed is printed,
 * and `HZ_FUZZ_SEED=<n> npx tap test/api/fuzz.test.ts` replays another run.
 */
import t from 'tap'
import { HydrazineClient, MAX_ISSUES, ValidationError } from '../../app/index.ts'
import { groupSpec, hostSpec } from '../helpers/requests.ts'
import { startContract } from './contract.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const SEED = Number(process.env.HZ_FUZZ_SEED ?? 0x5eed)
const CASES = 1200

/** mulberry32: a small, fast, seedable PRNG. */
function prng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)] as T
  return { next, int, pick }
}
type Rng = ReturnType<typeof prng>

interface Case {
  readonly label: string
  readonly path: string
  readonly body: string | Uint8Array
  readonly contentType?: string
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

const GROUP = 'group-a'
const baseGroup = (): { [key: string]: Json } => groupSpec('tenant-a', '10.50.0.0/24', '10.50.0.1')
// No free-form strings (identifier): any byte damaged inside a value makes it invalid.
const baseHost = (): { [key: string]: Json } => ({
  ...hostSpec(GROUP, 'dpu-1', 1, { hostAccess: 'FabricAccess' }),
  type: 'BareMetal',
})

/** Values that are never valid where a string with a format is expected. */
function wrongValue(rng: Rng): Json {
  return rng.pick<() => Json>([
    () => rng.int(-1e9, 1e9),
    () => rng.next() * 1e300,
    () => rng.pick([true, false]),
    () => null,
    () => [],
    () => ['10.0.0.0/24'],
    () => ({}),
    () => ({ cidr: '10.0.0.0/24' }),
    // A number as a string: with a fraction, so it is not a valid name either.
    () => `${rng.int(0, 4294967295)}.5`,
    () => '',
    () => ' ',
    () => '\u0000',
    () => '\ud800',
    () => '☃'.repeat(rng.int(1, 40)),
    () => 'x'.repeat(rng.int(254, 60_000)),
    () => '<script>alert(1)</script>',
    () => "'; DROP TABLE groups; --",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a log-injection probe, not a template
    () => '${jndi:ldap://x}',
    () => '../../../../etc/passwd',
    () => '%00%2e%2e',
  ])()
}

const BAD_CIDRS = [
  '10.0.0.1/24',
  '10.0.0.0/33',
  '10.0.0.0/-1',
  '300.0.0.0/8',
  '10.0.0.0',
  '10.0.0.0/',
  '/24',
  '10.0.0.0/24/24',
  ' 10.0.0.0/24',
  '10.0.0.0/24 ',
  '10.0.0/24',
  '10.0.0.0.0/24',
  '0x0a.0.0.0/8',
  'fd00::/64',
  '::/0',
  '10.0.0.0/2a',
  '１０.0.0.0/24',
]

function badCidr(rng: Rng): string {
  if (rng.next() < 0.6) return rng.pick(BAD_CIDRS)
  const octet = () => rng.int(0, 400)
  return `${octet()}.${octet()}.${octet()}.${rng.int(1, 255)}/${rng.int(33, 999)}`
}

const BAD_MACS = [
  '52:54:00:12:34',
  '52:54:00:12:34:56:78',
  '01:00:5e:00:00:01',
  'ff:ff:ff:ff:ff:ff',
  '52-54-00-12-34-56',
  '5254.0012.3456',
  '525400123456',
  'zz:54:00:12:34:56',
  '52:54:00:12:34:5g',
  ' 52:54:00:12:34:56',
  '52:54:00:12:34:56\n',
]

function badMac(rng: Rng): string {
  if (rng.next() < 0.6) return rng.pick(BAD_MACS)
  const hex = '0123456789abcdefXYZ:'
  return Array.from({ length: rng.int(0, 30) }, () => rng.pick([...hex])).join('')
}

/** Sets `value` at a dotted path inside a copy of `spec`. */
function setAt(spec: { [key: string]: Json }, path: string, value: Json) {
  const copy = structuredClone(spec)
  const keys = path.split('.')
  let node: { [key: string]: Json } = copy
  for (const key of keys.slice(0, -1)) {
    const next = node[key]
    if (typeof next !== 'object' || next === null || Array.isArray(next)) return copy
    node = next
  }
  node[keys.at(-1) ?? ''] = value
  return copy
}

const GROUP_FIELDS = ['tenantId', 'network', 'network.cidr', 'network.gateway', 'dhcpServer']
const HOST_FIELDS = [
  'resourceGroup',
  'type',
  'hostMAC',
  'hostIP',
  'dpu',
  'dpu.id',
  'dpu.ips',
  'hostAccess',
]

const routeOf = (kind: 'rg' | 'mr', name = kind === 'rg' ? 'fuzz-group' : 'fuzz-host') =>
  kind === 'rg' ? `/v1/resource-groups/${name}` : `/v1/managed-resources/${name}`
const baseOf = (kind: 'rg' | 'mr') => (kind === 'rg' ? baseGroup() : baseHost())

const enc = new TextEncoder()

/** One generator per family of hostile input; each returns a body that must be refused. */
const generators: Record<string, (rng: Rng, kind: 'rg' | 'mr') => Omit<Case, 'label'>> = {
  wrongType(rng, kind) {
    const field = rng.pick(kind === 'rg' ? GROUP_FIELDS : HOST_FIELDS)
    return {
      path: routeOf(kind),
      body: JSON.stringify(setAt(baseOf(kind), field, wrongValue(rng))),
    }
  },
  hugeString(rng, kind) {
    const field = rng.pick(kind === 'rg' ? GROUP_FIELDS : HOST_FIELDS)
    const huge = rng.pick(['a', '9', '.', '/', 'é', '"']).repeat(rng.int(64, 80_000))
    return { path: routeOf(kind), body: JSON.stringify(setAt(baseOf(kind), field, huge)) }
  },
  badCidr(rng) {
    const spec = rng.pick([
      () => setAt(baseGroup(), 'network.cidr', badCidr(rng)),
      () => setAt(baseGroup(), 'network.gateway', rng.pick(['10.60.0.1', '10.50.0.999', '::1'])),
      // IPv6 is fine in an extra subnet: only malformed ones there.
      () =>
        setAt(baseGroup(), 'extraSubnets', [
          { cidr: badCidr(rng).replace(/^.*:.*$/, '10.1.1.1/8') },
        ]),
      () =>
        setAt(
          baseGroup(),
          'extraSubnets',
          Array.from({ length: 17 }, () => ({ cidr: 'fd00::/64' })),
        ),
    ])()
    return { path: routeOf('rg'), body: JSON.stringify(spec) }
  },
  badMac(rng) {
    return { path: routeOf('mr'), body: JSON.stringify(setAt(baseHost(), 'hostMAC', badMac(rng))) }
  },
  badAddresses(rng) {
    const spec = rng.pick([
      () => setAt(baseHost(), 'dpu.ips', []),
      () => setAt(baseHost(), 'dpu.ips', ['172.18.0.11']),
      () => setAt(baseHost(), 'dpu.ips', ['172.18.0.11', '172.18.0.11']),
      () => setAt(baseHost(), 'dpu.ips', ['172.18.0.11', '172.18.0.12', '172.18.0.13']),
      () => setAt(baseHost(), 'dpu.ips', ['fd00::1', '172.18.0.12']),
      () => setAt(baseHost(), 'hostIP', 'fd00::10'),
      () => setAt(baseHost(), 'hostIP', `10.50.0.${rng.int(256, 999)}`),
      () => setAt(baseGroup(), 'dhcpServer', 'fd00::53'),
    ])()
    return { path: routeOf('dpu' in spec ? 'mr' : 'rg'), body: JSON.stringify(spec) }
  },
  prototypePollution(rng, kind) {
    const key = rng.pick(['__proto__', 'constructor', 'prototype'])
    const payload =
      key === 'constructor'
        ? '{"prototype":{"polluted":"yes"}}'
        : '{"polluted":"yes","isAdmin":true}'
    const valid = JSON.stringify(baseOf(kind))
    const body = rng.pick([
      () => `{"${key}":${payload}}`,
      () => `{"${key}":${payload},${valid.slice(1)}`,
      () => `${valid.slice(0, -1)},"${key}":${payload}}`,
      () =>
        kind === 'rg'
          ? valid.replace('"network":{', `"network":{"${key}":${payload},`)
          : valid.replace('"dpu":{', `"dpu":{"${key}":${payload},`),
      () => `{"__proto__":{"__proto__":{"polluted":"yes"}},"constructor":${payload}}`,
    ])()
    return { path: routeOf(kind), body }
  },
  deepNesting(rng, kind) {
    const depth = rng.pick([100, 1000, 5000, 10_000, 20_000])
    const open = rng.pick(['[', '{"a":'])
    const close = open === '[' ? ']' : '}'
    const inner = `${open.repeat(depth)}1${close.repeat(depth)}`
    const field = kind === 'rg' ? rng.pick(['network', 'tenantId']) : rng.pick(['dpu', 'hostMAC'])
    const body = rng.pick([
      () => inner,
      () => JSON.stringify(baseOf(kind)).replace(`"${field}":`, `"${field}":${inner},"x":`),
      () => `${open.repeat(depth)}`,
    ])()
    return { path: routeOf(kind), body }
  },
  invalidUtf8(rng, kind) {
    const bytes = enc.encode(JSON.stringify(baseOf(kind)))
    const bad = rng.pick([
      [0xff],
      [0xfe, 0xff],
      [0xc3, 0x28],
      [0xe2, 0x82],
      [0xed, 0xa0, 0x80],
      [0xc0, 0xaf],
    ])
    const at = rng.int(1, bytes.length - 2)
    const body = new Uint8Array(bytes.length + bad.length)
    body.set(bytes.subarray(0, at), 0)
    body.set(bad, at)
    body.set(bytes.subarray(at), at + bad.length)
    return { path: routeOf(kind), body }
  },
  truncated(rng, kind) {
    const text = JSON.stringify(baseOf(kind))
    return { path: routeOf(kind), body: text.slice(0, rng.int(0, text.length - 1)) }
  },
  numbersAsStringsAndArraysAsObjects(rng) {
    const spec = rng.pick([
      () => setAt(baseGroup(), 'network', ['10.50.0.0/24', '10.50.0.1']),
      () => setAt(baseGroup(), 'extraSubnets', { cidr: 'fd00::/64' }),
      () => setAt(baseGroup(), 'extraSubnets', [{ cidr: 'fd00::/64', dhcp: 'true' }]),
      () => setAt(baseGroup(), 'network.cidr', 167_772_160),
      () => setAt(baseHost(), 'dpu', ['dpu-1', ['172.18.0.11']]),
      () => setAt(baseHost(), 'dpu.ips', '172.18.0.11'),
      () => setAt(baseHost(), 'dpu.ips', [2886860811, 2886860911]),
      () => setAt(baseHost(), 'hostAccess', rng.pick(['0', '1', 'none', 'NONE', 'fabricaccess'])),
      () => setAt(baseHost(), 'type', rng.pick(['baremetal', 'VM', '1'])),
    ])()
    return { path: routeOf('dpu' in spec ? 'mr' : 'rg'), body: JSON.stringify(spec) }
  },
  notAnObject(rng, kind) {
    const body = rng.pick([
      '',
      'null',
      'true',
      '0',
      '"spec"',
      '[]',
      `[${JSON.stringify(baseOf(kind))}]`,
      '{}',
      '{"":""}',
      ' ',
      '\u0000',
      '{"a":1,}',
      "{'tenantId':'tenant-a'}",
      '{"tenantId":"tenant-a" "network":{}}',
      'NaN',
      '{"network":{"cidr":"10.50.0.0/24","gateway":"10.50.0.1"},"tenantId":Infinity}',
    ])
    return { path: routeOf(kind), body }
  },
  unknownKeys(rng, kind) {
    const spec = baseOf(kind)
    spec[
      rng.pick(['status', 'specVersion', 'name', 'extra', 'TenantId', 'tenantID', 'x'.repeat(300)])
    ] = wrongValue(rng)
    return { path: routeOf(kind), body: JSON.stringify(spec) }
  },
  hostileName(rng, kind) {
    const name = rng.pick([
      'UPPER',
      'has_underscore',
      '-leading',
      'trailing-',
      'a'.repeat(64),
      'x'.repeat(rng.int(300, 5000)),
      '%E2%98%83',
      '%00',
      'a%2Fb',
      'a%20b',
      '%2e%2e',
      'n%0Aewline',
      encodeURIComponent('__proto__'),
      'constructor',
    ])
    // Valid bodies: only the name is wrong. `constructor` is a valid label; its body is not.
    const spec = name === 'constructor' ? setAt(baseOf(kind), 'dpu', null) : baseOf(kind)
    const body = JSON.stringify(
      kind === 'rg' && name === 'constructor' ? setAt(spec, 'network', 1) : spec,
    )
    return { path: routeOf(kind, name), body }
  },
  publicIp(rng) {
    const ip = rng.pick([
      '256.1.1.1',
      '1.2.3',
      '1.2.3.4.5',
      // IPv6 public IPs are valid: malformed ones, and one with a zone (not an address).
      ':::1',
      '1:2:3:4:5:6:7:8:9',
      '2001%3Adb8%3A%3Ag',
      'fd00%3A%3A1%25eth0',
      '01.02.03.04',
      '1.2.3.4%00',
      'x'.repeat(rng.int(16, 3000)),
      '%E2%98%83',
      `${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(256, 9999)}`,
      '-1.0.0.0',
      '0x7f.0.0.1',
    ])
    return { path: `/v1/public-ips/${ip}`, body: '' }
  },
  wrongMediaType(rng, kind) {
    return {
      path: routeOf(kind),
      body: JSON.stringify(baseOf(kind)),
      contentType: rng.pick([
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data',
        'application/jsonx',
        '',
      ]),
    }
  },
}

function* cases(seed: number, count: number): Generator<Case> {
  const rng = prng(seed)
  const names = Object.keys(generators)
  for (let i = 0; i < count; i++) {
    const label = names[i % names.length] ?? 'wrongType'
    const generate = generators[label]
    if (!generate) continue
    const kind = rng.pick(['rg', 'mr'] as const)
    yield { label: `#${i} ${label}/${kind}`, ...generate(rng, kind) }
  }
}

t.test(`${CASES} hostile PUT bodies are refused and change nothing (seed ${SEED})`, async (t) => {
  const contract = await startContract(t)
  const { app, internal } = contract.app({ operator: [OPERATOR], tenants: {} })
  // A real group, so that host bodies get past "group does not exist" to their fields.
  const put = await app.request(`/v1/resource-groups/${GROUP}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
    body: JSON.stringify(baseGroup()),
  })
  t.equal(put.status, 202, 'the group is accepted')
  t.equal((await contract.queue.getJobCounts()).waiting, 1, 'its job is enqueued')
  const before = await contract.snapshot()

  const failures: string[] = []
  const statuses = new Map<number, number>()
  let sent = 0
  for (const c of cases(SEED, CASES)) {
    const headers: Record<string, string> = { authorization: `Bearer ${OPERATOR}` }
    headers['content-type'] = c.contentType ?? 'application/json'
    if (headers['content-type'] === '') delete headers['content-type']
    const res = await app.request(c.path, { method: 'PUT', headers, body: c.body })
    sent++
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    const text = await res.text()
    let code: unknown
    try {
      code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code
    } catch {
      code = undefined
    }
    if (res.status < 400 || res.status > 499 || typeof code !== 'string') {
      const cause = res.status === 500 ? ` (${internal.at(-1)})` : ''
      failures.push(
        `${c.label} ${c.path.slice(0, 80)}: ${res.status} ${text.slice(0, 200)}${cause}`,
      )
    }
  }
  t.comment(`statuses: ${JSON.stringify(Object.fromEntries(statuses))}`)
  t.ok(sent >= 1000, `${sent} requests sent`)
  t.same(failures, [], 'every answer is a 4xx with a JSON error code')

  const health = await app.request('/healthz')
  t.equal(health.status, 200, 'the process still answers')
  t.same(await contract.snapshot(), before, 'no job enqueued, store and public IPs unchanged')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is not polluted')
  t.equal(Object.hasOwn(Object.prototype, 'isAdmin'), false)
})

t.test('a body with thousands of bad items gets a short answer', async (t) => {
  const client = new HydrazineClient({} as ConstructorParameters<typeof HydrazineClient>[0])
  const spec = {
    tenantId: 't1',
    network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' },
    extraSubnets: Array.from({ length: 5000 }, () => ({})),
  }
  const error = await client.applyGroup('g1', spec).catch((e: unknown) => e)
  t.type(error, ValidationError)
  const { issues } = error as ValidationError
  t.equal(issues.length, MAX_ISSUES + 1, `${MAX_ISSUES} issues and one that counts the rest`)
  t.match(issues.at(-1), { path: '(body)', message: /and \d+ more invalid fields/ })
})

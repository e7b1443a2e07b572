import t from 'tap'
import { ConfigError } from '../errors.ts'
import { DEFAULT_DNS_ZONE, MAX_DNS_ZONE_LENGTH } from './dns.ts'
import { loadConfig } from './index.ts'

t.test('HYDRAZINE_DNS_ZONE: the zone group domains live in', async (t) => {
  t.equal(loadConfig({}).dnsZone, DEFAULT_DNS_ZONE, 'default hydrazine.internal')
  t.equal(DEFAULT_DNS_ZONE, 'hydrazine.internal')
  const accepted: [string, string | undefined][] = [
    ['cloud.example.internal', 'cloud.example.internal'],
    ['internal', 'internal'],
    ['Cloud.Example.', 'cloud.example'],
    ['a-1.b2', 'a-1.b2'],
    [`${'a'.repeat(63)}.${'b'.repeat(61)}`, `${'a'.repeat(63)}.${'b'.repeat(61)}`],
    ['off', undefined],
  ]
  for (const [value, zone] of accepted) {
    t.equal(loadConfig({ HYDRAZINE_DNS_ZONE: value }).dnsZone, zone, `${value} → ${zone}`)
  }
  t.equal(MAX_DNS_ZONE_LENGTH, 125, '63 + 1 + 63 + 1 + 125 = 253')
})

t.test('a bad zone stops start-up, naming HYDRAZINE_DNS_ZONE', async (t) => {
  const refused: [string, string, RegExp][] = [
    ['a label with an underscore', 'my_zone.internal', /must be a DNS name/],
    ['an empty label', 'a..b', /must be a DNS name/],
    ['a label starting with -', '-a.internal', /must be a DNS name/],
    ['a label of 64', `${'a'.repeat(64)}.internal`, /must be a DNS name/],
    ['spaces', 'my zone', /must be a DNS name/],
    ['longer than 125', `${'a'.repeat(63)}.${'b'.repeat(62)}`, /at most 125 characters/],
  ]
  for (const [name, value, message] of refused) {
    const error = t.throws(() => loadConfig({ HYDRAZINE_DNS_ZONE: value }), name) as ConfigError
    t.ok(error instanceof ConfigError, `${name}: a ConfigError`)
    t.match(error.message, /HYDRAZINE_DNS_ZONE: /, `${name}: names the variable`)
    t.match(error.message, message, `${name}: says why`)
    t.same(
      error.issues.map((i) => i.path),
      ['HYDRAZINE_DNS_ZONE'],
      `${name}: one issue, the variable`,
    )
  }
})

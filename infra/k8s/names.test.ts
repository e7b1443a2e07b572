import t from 'tap'
import { hashedName, readableName } from './names.ts'

const LABEL = /^[a-z]([a-z0-9-]*[a-z0-9])?$/

t.test('names: DNS-1035 labels within their limit, distinct for distinct keys', async (t) => {
  const cases: [string, string, number, RegExp][] = [
    ['ovn', 'tenant-a', 52, /^ovn-tenant-a-[0-9a-f]{16}$/],
    ['ovn', '0-digit-first', 52, /^ovn-0-digit-first-[0-9a-f]{16}$/],
    ['ovn', 'x'.repeat(63), 52, /^ovn-x{31}-[0-9a-f]{16}$/],
    ['hydrazine-dpu', 'BF3_dpu.2', 63, /^hydrazine-dpu-bf3-dpu-2-[0-9a-f]{16}$/],
    ['hydrazine-dpu', '___', 63, /^hydrazine-dpu-[0-9a-f]{16}$/],
  ]
  for (const [prefix, key, max, want] of cases) {
    const name = hashedName(prefix, key, max)
    t.match(name, want, key)
    t.match(name, LABEL, `${key}: a DNS-1035 label`)
    t.ok(name.length <= max, `${key}: at most ${max}`)
  }
  t.not(hashedName('ovn', `${'a'.repeat(62)}1`, 52), hashedName('ovn', `${'a'.repeat(62)}2`, 52))
  t.throws(() => hashedName('a-very-long-prefix', 'k', 20), RangeError)
})

t.test('readable names for operator keys, hashed when they would not be valid', async (t) => {
  t.equal(readableName('hydrazine-dpu', 'dpu-1', 63), 'hydrazine-dpu-dpu-1')
  t.match(readableName('hydrazine-dpu', 'DPU-1', 63), /^hydrazine-dpu-dpu-1-[0-9a-f]{16}$/)
  t.match(readableName('hydrazine-dpu', 'd'.repeat(60), 63), /^hydrazine-dpu-d+-[0-9a-f]{16}$/)
})

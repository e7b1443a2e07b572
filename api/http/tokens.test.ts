import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../lib/errors.ts'
import { createTokenLookup, loadTokens } from './tokens.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const TENANT = 'tenant-a-token-0123456789abcdef'

t.test('a tokens file maps each token to its principal', async (t) => {
  const dir = t.testdir({})
  const file = join(dir, 'tokens.json')
  await writeFile(file, JSON.stringify({ operator: [OPERATOR], tenants: { 'tenant-a': [TENANT] } }))
  const lookup = createTokenLookup(await loadTokens({ tokensFile: file, dataDir: dir }))
  t.same(lookup(OPERATOR), { kind: 'operator' })
  t.same(lookup(TENANT), { kind: 'tenant', tenant: 'tenant-a' })
  t.equal(lookup(`${OPERATOR}x`), undefined)
  t.equal(lookup(''), undefined)
})

t.test('the embedded default is the operator token in the data dir', async (t) => {
  const dir = t.testdir({})
  await writeFile(join(dir, 'operator-token'), `${OPERATOR}\n`)
  const tokens = await loadTokens({ dataDir: dir })
  t.same(tokens, { operator: [OPERATOR], tenants: {} })
})

t.test('a bad tokens file is a ConfigError naming the fields', async (t) => {
  const dir = t.testdir({})
  const cases: [string, string, string[]][] = [
    ['not JSON', '{nope', []],
    ['short token', JSON.stringify({ operator: ['short'] }), ['operator.0']],
    ['bad tenant id', JSON.stringify({ tenants: { Bad_Tenant: [TENANT] } }), ['tenants']],
    [
      "the admin network's reserved tenant",
      JSON.stringify({ tenants: { 'hydrazine-admin': [TENANT] } }),
      ['tenants'],
    ],
    ['unknown key', JSON.stringify({ operators: [OPERATOR] }), ['operators']],
  ]
  for (const [name, text, paths] of cases) {
    const file = join(dir, `${name.replaceAll(' ', '-')}.json`)
    await writeFile(file, text)
    const error = await loadTokens({ tokensFile: file, dataDir: dir }).catch((e: unknown) => e)
    t.type(error, ConfigError, name)
    if (error instanceof ConfigError) {
      for (const path of paths) {
        t.ok(
          error.issues.some((i) => i.path.startsWith(path)),
          `${name}: names ${path} (${error.message})`,
        )
      }
    }
  }
})

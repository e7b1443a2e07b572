import t from 'tap'
import { ConfigError } from '../../lib/errors.ts'
import { type Producer, producerRedisAclRules } from '../../lib/jobs/producers.ts'
import { ADMIN_TENANT } from '../../lib/model/admin-network.ts'
import { parseProducers } from './producers-file.ts'

const SHA = 'a'.repeat(64)

t.test('each producer acts as a tenant or as the operator', async (t) => {
  const producers = parseProducers({
    carbide: { operator: true, passwordSha256: SHA },
    'ci-a': { tenant: 'tenant-a', passwordSha256: SHA },
  })
  t.same(producers, [
    { id: 'carbide', principal: { kind: 'operator' }, passwordSha256: SHA },
    { id: 'ci-a', principal: { kind: 'tenant', tenant: 'tenant-a' }, passwordSha256: SHA },
  ])
  t.same(producerRedisAclRules(producers[1] as Producer, 'bull').slice(0, 6), [
    'reset',
    'on',
    `#${SHA}`,
    '~bull:{hz-producers}producer-ci-a:*',
    'resetchannels',
    '-@all',
  ])
})

t.test('a bad producers file names every bad field', async (t) => {
  const issues = (input: unknown) => {
    try {
      parseProducers(input)
    } catch (error) {
      if (error instanceof ConfigError) return error.issues.map((i) => i.path)
      throw error
    }
    return []
  }
  t.same(issues({ a: { passwordSha256: SHA } }), ['a.tenant'], 'no principal')
  t.same(issues({ a: { tenant: 't', operator: true, passwordSha256: SHA } }), ['a.tenant'], 'two')
  t.same(issues({ a: { operator: true, passwordSha256: 'secret' } }), ['a.passwordSha256'])
  t.same(issues({ a: { operator: true } }), ['a.passwordSha256'], 'no password')
  t.same(issues({ 'Not A Label': { operator: true, passwordSha256: SHA } }), ['Not A Label'])
  t.same(
    issues({ a: { tenant: ADMIN_TENANT, passwordSha256: SHA } }),
    ['a.tenant'],
    "the admin network's tenant is reserved",
  )
  t.same(issues({ a: { operator: false, passwordSha256: SHA } }), ['a.operator'])
})

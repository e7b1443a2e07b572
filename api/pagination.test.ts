import t from 'tap'
import { ValidationError } from '../app/index.ts'
import {
  DEFAULT_PAGE_SIZE,
  decodeContinue,
  encodeContinue,
  limitParam,
  MAX_PAGE_SIZE,
  pageSizeParam,
} from './pagination.ts'

/** The issue paths of the ValidationError `fn` throws (undefined: it threw none). */
function refused(fn: () => unknown): string[] | undefined {
  try {
    fn()
  } catch (error) {
    if (error instanceof ValidationError) return error.issues.map((i) => i.path)
    throw error
  }
  return undefined
}

t.test('a continue token round-trips, for its own list only', async (t) => {
  const token = encodeContinue('resource-groups', 'group-7')
  t.match(token, /^[A-Za-z0-9_-]+$/, 'URL-safe without escaping')
  t.equal(decodeContinue('resource-groups', token, 'continue'), 'group-7')
  t.same(
    refused(() => decodeContinue('managed-resources', token, 'continue')),
    ['continue'],
    "another list's token",
  )
  const ip = encodeContinue('public-ips', '2001:db8::1')
  t.equal(decodeContinue('public-ips', ip, 'pageToken'), '2001:db8::1')
})

t.test('a token that is not one of ours is refused, naming the field', async (t) => {
  const b64 = (s: string) => Buffer.from(s).toString('base64url')
  const cases: [string, string][] = [
    ['not base64url', 'abc$%'],
    ['not JSON', b64('group-1')],
    ['JSON of another shape', b64('{"after":"group-1"}')],
    ['another version', b64('{"v":2,"k":"resource-groups","a":"group-1"}')],
    ['a key no name can be', b64('{"v":1,"k":"resource-groups","a":"../../etc"}')],
    ['an address that is none', b64('{"v":1,"k":"public-ips","a":"300.1.1.1"}')],
    ['an address with a zone', b64('{"v":1,"k":"public-ips","a":"fe80::1%eth0"}')],
    ['too long', 'A'.repeat(2000)],
  ]
  for (const [name, token] of cases) {
    const list = name.includes('address') ? 'public-ips' : 'resource-groups'
    t.same(
      refused(() => decodeContinue(list, token, 'continue')),
      ['continue'],
      name,
    )
  }
})

t.test('HTTP ?limit=: 1 to the maximum, default when absent', async (t) => {
  t.equal(limitParam(undefined), DEFAULT_PAGE_SIZE)
  t.equal(limitParam('1'), 1)
  t.equal(limitParam(String(MAX_PAGE_SIZE)), MAX_PAGE_SIZE)
  for (const bad of ['0', '-1', '1001', '2.5', 'ten', '', ' 5', '1e3', '99999999999']) {
    t.same(
      refused(() => limitParam(bad)),
      ['limit'],
      JSON.stringify(bad),
    )
  }
})

t.test(
  'gRPC page_size: 0 is the default, above the maximum is the maximum (AIP-158)',
  async (t) => {
    t.equal(pageSizeParam(0), DEFAULT_PAGE_SIZE)
    t.equal(pageSizeParam(3), 3)
    t.equal(pageSizeParam(5000), MAX_PAGE_SIZE)
    t.same(
      refused(() => pageSizeParam(-1)),
      ['pageSize'],
    )
  },
)

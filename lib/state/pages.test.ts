import t from 'tap'
import { pageOf } from './pages.ts'

t.test('pageOf: the first `limit` keys after `after`, sorted', async (t) => {
  const names = ['e', 'a', 'c', 'b', 'd']
  const cases: [string, Parameters<typeof pageOf>[1], object][] = [
    ['first page', { limit: 2 }, { items: ['a', 'b'], next: 'b' }],
    ['middle page', { limit: 2, after: 'b' }, { items: ['c', 'd'], next: 'd' }],
    ['last page, exactly full: no next', { limit: 1, after: 'd' }, { items: ['e'] }],
    ['last page, short', { limit: 2, after: 'd' }, { items: ['e'] }],
    ['everything at once', { limit: 10 }, { items: ['a', 'b', 'c', 'd', 'e'] }],
    ['after the last key', { limit: 2, after: 'e' }, { items: [] }],
    [
      'after a key that is gone: its place',
      { limit: 2, after: 'bb' },
      { items: ['c', 'd'], next: 'd' },
    ],
    ['after a key before all', { limit: 1, after: '0' }, { items: ['a'], next: 'a' }],
  ]
  for (const [name, page, expected] of cases) t.same(pageOf(names, page), expected, name)
  t.same(pageOf([], { limit: 5 }), { items: [] }, 'an empty list')
})

t.test('pageOf: paging through a list that changes meanwhile', async (t) => {
  let names = ['g-1', 'g-2', 'g-3', 'g-4', 'g-5']
  const first = pageOf(names, { limit: 2 })
  names = names.filter((n) => n !== 'g-1' && n !== 'g-3').concat('g-0', 'g-6')
  const second = pageOf(names, { limit: 2, after: first.next ?? '' })
  const third = pageOf(names, { limit: 2, after: second.next ?? '' })
  t.same(
    [...first.items, ...second.items, ...third.items],
    ['g-1', 'g-2', 'g-4', 'g-5', 'g-6'],
    'nothing twice, nothing that stayed skipped; an addition after the cursor is seen',
  )
  t.equal(third.next, undefined)
})

t.test('pageOf: keys of entries that are not strings', async (t) => {
  const ips = [{ ip: '10.0.0.9' }, { ip: '10.0.0.10' }]
  const key = (p: { ip: string }) =>
    p.ip
      .split('.')
      .map((o) => o.padStart(3, '0'))
      .join('.')
  t.same(pageOf(ips, { limit: 1 }, key), { items: [{ ip: '10.0.0.9' }], next: '010.000.000.009' })
  t.throws(() => pageOf(ips, { limit: 0 }), RangeError, 'a limit below 1 is a bug')
})

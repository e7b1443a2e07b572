import t from 'tap'
import { traceRequestOf } from './trace.ts'

t.test('the query string as a trace request', async (t) => {
  const cases: [Record<string, string[]>, object][] = [
    [
      { from: ['h1'], to: ['h2'] },
      { from: 'h1', to: 'h2' },
    ],
    [
      { from: ['h1'], to: ['10.0.0.3'], proto: ['tcp'], port: ['443'], raw: ['true'] },
      { from: 'h1', to: '10.0.0.3', proto: 'tcp', port: 443, raw: true },
    ],
    [
      { from: ['fabric'], to: ['203.0.113.7'], raw: ['0'] },
      { from: 'fabric', to: '203.0.113.7', raw: false },
    ],
  ]
  for (const [query, request] of cases) t.same(traceRequestOf(query), request)
})

t.test('a bad query string is refused, naming each bad parameter', async (t) => {
  const cases: [Record<string, string[]>, string[]][] = [
    [{ to: ['h2'] }, ['from']],
    [{}, ['from', 'to']],
    [{ from: ['h1'], to: ['h2'], port: ['http'] }, ['port']],
    [{ from: ['h1'], to: ['h2'], port: ['123456'] }, ['port']],
    [{ from: ['h1'], to: ['h2'], raw: ['yes'] }, ['raw']],
    [{ from: ['h1'], to: ['h2'], verbose: ['1'] }, ['verbose']],
    [{ from: ['h1', 'h3'], to: ['h2'] }, ['from']],
  ]
  for (const [query, paths] of cases) {
    const error = t.throws(() => traceRequestOf(query), { code: 'INVALID' }, JSON.stringify(query))
    const issues = (error as { issues?: { path: string }[] }).issues ?? []
    t.same(
      issues.map((i) => i.path),
      paths,
      `names ${paths.join(', ')}`,
    )
  }
})

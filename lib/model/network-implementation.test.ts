import t from 'tap'
import * as v from 'valibot'
import { implementationOf, ResourceGroupSpec } from './objects.ts'

const base = { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } }

t.test('networkImplementationType: Overlay or Fabric, or left out', async (t) => {
  for (const type of ['Overlay', 'Fabric'] as const) {
    const spec = v.parse(ResourceGroupSpec, { ...base, networkImplementationType: type })
    t.equal(spec.networkImplementationType, type)
    t.equal(implementationOf(spec), type)
  }
  const absent = v.parse(ResourceGroupSpec, base)
  t.equal(
    absent.networkImplementationType,
    undefined,
    'the default is the operator’s, applied later',
  )
  t.equal(implementationOf(absent), 'Overlay', 'a group stored without it is Overlay')
})

t.test(
  'a bad value, or the retired implementation field, is refused naming the field',
  async (t) => {
    const cases: [unknown, string, RegExp][] = [
      [
        { ...base, networkImplementationType: 'overlay' },
        'networkImplementationType',
        /Overlay or Fabric/,
      ],
      [{ ...base, networkImplementationType: 2 }, 'networkImplementationType', /Overlay or Fabric/],
      [{ ...base, implementation: 'SharedCentral' }, 'implementation', /./],
    ]
    for (const [input, path, message] of cases) {
      const result = v.safeParse(ResourceGroupSpec, input)
      t.notOk(result.success)
      const issue = result.issues?.[0]
      t.equal(issue && v.getDotPath(issue), path)
      t.match(issue?.message, message)
    }
  },
)

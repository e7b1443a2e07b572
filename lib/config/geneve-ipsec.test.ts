import t from 'tap'
import { loadConfig } from './index.ts'

t.test('HYDRAZINE_GENEVE_IPSEC: the Geneve tunnels between DPUs are IPsec', async (t) => {
  const cases: [string | undefined, boolean | RegExp][] = [
    [undefined, false],
    ['', false],
    ['false', false],
    ['true', true],
    ['yes', /HYDRAZINE_GENEVE_IPSEC: must be true or false/],
    ['TRUE', /HYDRAZINE_GENEVE_IPSEC: must be true or false/],
  ]
  for (const [value, expected] of cases) {
    const env = value === undefined ? {} : { HYDRAZINE_GENEVE_IPSEC: value }
    if (typeof expected === 'boolean') t.equal(loadConfig(env).geneveIpsec, expected, `${value}`)
    else t.throws(() => loadConfig(env), expected, `${value}`)
  }
})

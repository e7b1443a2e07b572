import t from 'tap'
import { ConfigError } from '../errors.ts'
import { loadConfig } from './index.ts'

t.test('defaults: Overlay, VNIs 10000-19999, VLAN ids 100-3999', async (t) => {
  t.same(loadConfig({}).networkImplementation, {
    defaultType: 'Overlay',
    fabricRanges: {
      vnis: { first: 10000, last: 19999, setting: 'HYDRAZINE_FABRIC_VNIS' },
      vlans: { first: 100, last: 3999, setting: 'HYDRAZINE_FABRIC_VLANS' },
    },
  })
})

t.test('the operator sets the default and the ranges', async (t) => {
  const config = loadConfig({
    HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION: 'Fabric',
    HYDRAZINE_FABRIC_VNIS: ' 1-16777215 ',
    HYDRAZINE_FABRIC_VLANS: '42',
  })
  t.same(config.networkImplementation, {
    defaultType: 'Fabric',
    fabricRanges: {
      vnis: { first: 1, last: 16777215, setting: 'HYDRAZINE_FABRIC_VNIS' },
      vlans: { first: 42, last: 42, setting: 'HYDRAZINE_FABRIC_VLANS' },
    },
  })
})

const refused: [string, Record<string, string>, RegExp][] = [
  [
    'an unknown implementation',
    { HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION: 'overlay' },
    /HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION: must be Overlay or Fabric/,
  ],
  [
    'a range that is no range',
    { HYDRAZINE_FABRIC_VNIS: '10000..19999' },
    /HYDRAZINE_FABRIC_VNIS: must be a range first-last/,
  ],
  ['VNI 0', { HYDRAZINE_FABRIC_VNIS: '0-10' }, /HYDRAZINE_FABRIC_VNIS: must lie within 1-16777215/],
  [
    'a VNI past 24 bits',
    { HYDRAZINE_FABRIC_VNIS: '16777000-16777216' },
    /HYDRAZINE_FABRIC_VNIS: must lie within 1-16777215/,
  ],
  [
    'VLAN 4095 (reserved)',
    { HYDRAZINE_FABRIC_VLANS: '100-4095' },
    /HYDRAZINE_FABRIC_VLANS: must lie within 1-4094/,
  ],
  [
    'a range ending before it starts',
    { HYDRAZINE_FABRIC_VLANS: '200-100' },
    /HYDRAZINE_FABRIC_VLANS: must not end before it starts/,
  ],
]

for (const [name, env, message] of refused) {
  t.test(`refused: ${name}, naming the variable`, async (t) => {
    t.throws(() => loadConfig(env), ConfigError)
    t.throws(() => loadConfig(env), { message })
  })
}

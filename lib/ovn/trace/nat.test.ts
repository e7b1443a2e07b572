import t from 'tap'
import { dnatTargetOf, type NatRule, snatSourceOf } from './nat.ts'

/** A PublicAccess host (10.0.0.2) and the subnet's SNAT, as a gateway router holds them. */
const rules: NatRule[] = [
  { type: 'snat', external_ip: '172.18.0.105', logical_ip: '10.0.0.0/24' },
  { type: 'dnat_and_snat', external_ip: '203.0.113.10', logical_ip: '10.0.0.2' },
  { type: 'dnat', external_ip: '172.18.0.105', logical_ip: '10.0.0.2' },
]

t.test('the source a host leaves as', async (t) => {
  const cases: [string, string | undefined][] = [
    ['10.0.0.2', '203.0.113.10'],
    ['10.0.0.3', '172.18.0.105'],
    ['10.1.0.3', undefined],
  ]
  for (const [source, expected] of cases) t.equal(snatSourceOf(rules, source), expected, source)
  t.equal(snatSourceOf([...rules].reverse(), '10.0.0.2'), '203.0.113.10', 'whatever the order')
})

t.test('the host a fabric address is DNATed to', async (t) => {
  const cases: [string, string | undefined][] = [
    ['203.0.113.10', '10.0.0.2'],
    ['172.18.0.105', '10.0.0.2'],
    ['198.51.100.7', undefined],
  ]
  for (const [external, expected] of cases) t.equal(dnatTargetOf(rules, external), expected)
  t.equal(dnatTargetOf(rules.slice(0, 1), '172.18.0.105'), undefined, 'an SNAT takes nothing in')
})

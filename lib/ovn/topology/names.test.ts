import t from 'tap'
import { compileGroupTopology, rowId } from './compile.ts'
import { base } from './fixtures/specs.ts'
import {
  EXTERNAL_ID_KEYS,
  GUARD_ID,
  topologyNames as names,
  OWNER_KEY,
  parseTopologyName,
  ROW_KEY,
  rowKeys,
  switchPortRowId,
} from './names.ts'

t.test('every name topologyNames makes reads back as what it is for', async (t) => {
  const g = 'group-a'
  const d = 'dpu-1'
  const cases: [string, 'datapath' | 'port', object][] = [
    [names.switch(g), 'datapath', { kind: 'switch', group: g }],
    [names.router(g), 'datapath', { kind: 'router', group: g }],
    [names.routerSwitchPort(g), 'port', { kind: 'router-switch-port', group: g }],
    [names.switchRouterPort(g), 'port', { kind: 'switch-router-port', group: g }],
    [names.hostPort(g, 'h1'), 'port', { kind: 'host-port', group: g, host: 'h1' }],
    [names.hostPort(g, 'ls'), 'port', { kind: 'host-port', group: g, host: 'ls' }],
    [names.relayPort(g, d), 'port', { kind: 'relay-port', group: g, dpu: d }],
    [names.transitSwitch(g, d), 'datapath', { kind: 'transit-switch', group: g, dpu: d }],
    [names.routerTransitPort(g, d), 'port', { kind: 'router-transit-port', group: g, dpu: d }],
    [names.transitRouterPort(g, d), 'port', { kind: 'transit-router-port', group: g, dpu: d }],
    [names.transitGatewayPort(g, d), 'port', { kind: 'transit-gateway-port', group: g, dpu: d }],
    [names.gatewayRouter(g, d), 'datapath', { kind: 'gateway-router', group: g, dpu: d }],
    [names.gatewayTransitPort(g, d), 'port', { kind: 'gateway-transit-port', group: g, dpu: d }],
    [names.gatewayPublicPort(g, d), 'port', { kind: 'gateway-public-port', group: g, dpu: d }],
    [names.publicSwitch(g, d), 'datapath', { kind: 'public-switch', group: g, dpu: d }],
    [names.publicGatewayPort(g, d), 'port', { kind: 'public-gateway-port', group: g, dpu: d }],
    [names.localnetPort(g, d), 'port', { kind: 'localnet-port', group: g, dpu: d }],
  ]
  for (const [name, as, expected] of cases) t.same(parseTopologyName(name, as), expected, name)
})

t.test('names that are not ours, or not of that sort, read as nothing', async (t) => {
  const cases: [string, 'datapath' | 'port'][] = [
    ['operator-ls', 'datapath'],
    ['hz/g', 'port'],
    ['hz//ls', 'datapath'],
    ['hz/g/h1', 'datapath'],
    ['hz/g/dpu/d/pub-ln', 'datapath'],
    ['hz/g/dpu/d/gw', 'port'],
    ['hz/g/dpu/d/other', 'port'],
    ['hz/g/relay/d', 'datapath'],
  ]
  for (const [name, as] of cases)
    t.equal(parseTopologyName(name, as), undefined, `${name} as ${as}`)
})

t.test(
  'the registry: one key per meaning, and the row keys and ids the compile uses',
  async (t) => {
    const keys = Object.values(EXTERNAL_ID_KEYS)
    t.equal(new Set(keys).size, keys.length, 'no two meanings share a key')
    t.ok(
      keys.every((k) => k.startsWith('hydrazine:')),
      'every key is in the hydrazine: namespace',
    )
    const { rows } = compileGroupTopology(base)
    const ids = new Set(rows.map(rowId))
    const port = base.members[0]?.logicalPort ?? ''
    t.ok(ids.has(switchPortRowId(port)), "a host port's row id")
    t.ok(ids.has(GUARD_ID), "the guard's row id")
    for (const key of [rowKeys.switch, rowKeys.router, rowKeys.gatewayRouter('dpu-1')]) {
      t.ok(
        rows.some((r) => r.key === key && r.row.external_ids[ROW_KEY] === key),
        key,
      )
    }
    t.ok(rows.every((r) => r.row.external_ids[OWNER_KEY] === 'group/alpha'))
  },
)

import t from 'tap'
import { compileGroupTopology, type GroupTopologySpec, topologyNames } from '../index.ts'
import { groupContext, newDraft } from './context.ts'
import { base, ok, rowsOf } from './fixtures/specs.ts'
import { relayRows } from './relay.ts'

t.test('a relay port: on the group switch, bound on its DPU, marked a DHCP relay', async (t) => {
  const draft = newDraft()
  const portName = topologyNames.relayPort('alpha', 'dpu-1')
  relayRows(groupContext(base), draft, { dpuId: 'dpu-1', portName })
  t.same(draft.problems, [])
  t.same(draft.rows, [
    {
      table: 'Logical_Switch_Port',
      key: `lsp/${portName}`,
      row: {
        name: portName,
        addresses: ['unknown'],
        options: { 'requested-chassis': 'dpu-1' },
        external_ids: {
          'hydrazine:owner': 'group/alpha',
          'hydrazine:group': 'alpha',
          'hydrazine:key': `lsp/${portName}`,
          'hydrazine:dpu': 'dpu-1',
          'hydrazine:role': 'dhcp-relay',
        },
      },
      parent: { table: 'Logical_Switch', key: 'ls', column: 'ports' },
    },
  ])
})

const whole = compileGroupTopology({ ...base, members: [ok] })

const problems: {
  name: string
  relay: NonNullable<GroupTopologySpec['dhcpRelayPorts']>[number]
  problem: { code: string; message: RegExp }
  /** The relay port's addresses. */
  built: string[]
}[] = [
  {
    name: 'a relay address outside every subnet: its port has no address',
    relay: { dpuId: 'dpu-2', portName: 'r1', mac: '0a:00:00:00:00:fe', ip: '10.10.11.9' },
    problem: { code: 'TOPOLOGY_SPEC_INVALID', message: /relay r1 address 10\.10\.11\.9/ },
    built: ['0a:00:00:00:00:fe'],
  },
  {
    name: 'a relay address without a MAC: its port has no address',
    relay: { dpuId: 'dpu-2', portName: 'r1', ip: '10.10.10.9' },
    problem: { code: 'TOPOLOGY_SPEC_INVALID', message: /needs a MAC/ },
    built: ['unknown'],
  },
]
for (const c of problems) {
  t.test(`${c.name}, named in problems; the rest of the group is built`, async (t) => {
    const compiled = compileGroupTopology({ ...base, members: [ok], dhcpRelayPorts: [c.relay] })
    t.match(compiled.problems, [c.problem])
    t.equal(compiled.problems?.length, 1, 'one problem')
    const port = compiled.rows.find((r) => r.key === `lsp/${c.relay.portName}`)
    t.same(port && 'addresses' in port.row ? port.row.addresses : undefined, c.built)
    t.same(rowsOf(compiled.rows, 'ok'), rowsOf(whole.rows, 'ok'), 'the other host is whole')
  })
}

t.test("a relay port's addresses: MAC and its subnet address, else MAC only", async (t) => {
  const addressesOf = (relay: NonNullable<GroupTopologySpec['dhcpRelayPorts']>[number]) => {
    const row = compileGroupTopology({ ...base, dhcpRelayPorts: [relay] }).rows.find(
      (r) => r.table === 'Logical_Switch_Port' && r.row.name === relay.portName,
    )
    return row && 'addresses' in row.row ? row.row.addresses : undefined
  }
  const mac = '0a:00:00:00:00:fe'
  t.same(addressesOf({ dpuId: 'dpu-1', portName: 'r1', mac, ip: '10.10.10.9' }), [
    `${mac} 10.10.10.9`,
  ])
  t.same(addressesOf({ dpuId: 'dpu-1', portName: 'r1', mac }), [mac])
})

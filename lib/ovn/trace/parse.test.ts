import { readFileSync } from 'node:fs'
import t from 'tap'
import { TraceOutputError } from './errors.ts'
import { finalOutputs, parseTrace } from './parse.ts'

/** Real `ovn-trace` (OVN 23.03) output, captured against a compiled two-group topology. */
const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}.txt`, import.meta.url), 'utf8')

interface Case {
  readonly fixture: string
  readonly final: readonly { port: string; type: string }[]
  readonly finalGenerated?: readonly { port: string; type: string }[]
  readonly drops: readonly string[]
  readonly nat: readonly string[]
  readonly generated: readonly string[]
  readonly answeredBy?: string
  readonly stoppedAt?: string
}

const cases: Case[] = [
  {
    fixture: 'host-to-host',
    final: [{ port: 'hz/alpha/h2', type: '' }],
    drops: [],
    nat: [],
    generated: [],
  },
  {
    fixture: 'outside-snat-tcp',
    final: [{ port: 'hz/alpha/dpu/dpu-1/pub-ln', type: 'localnet' }],
    drops: [],
    nat: ['snat 203.0.113.10 on hz/alpha/dpu/dpu-1/gw'],
    generated: [],
  },
  {
    fixture: 'outside-arp',
    final: [],
    finalGenerated: [{ port: 'hz/alpha/dpu/dpu-1/pub-ln', type: 'localnet' }],
    drops: [],
    nat: [],
    generated: ['arp for 172.18.0.1 on hz/alpha/dpu/dpu-1/gw'],
  },
  {
    fixture: 'port-security-drop',
    final: [],
    drops: ['1. ls_in_apply_port_sec on hz/alpha/ls'],
    nat: [],
    generated: [],
  },
  {
    fixture: 'no-route-drop',
    final: [],
    drops: ['13. lr_in_ip_routing on hz/beta/dpu/dpu-3/gw'],
    nat: [],
    generated: [],
  },
  {
    fixture: 'arp-unanswered',
    final: [{ port: 'hz/beta/h2', type: '' }],
    drops: ['3. lr_in_ip_input on hz/beta/lr'],
    nat: [],
    generated: [],
  },
  {
    fixture: 'inbound-unsnat',
    final: [],
    drops: [],
    nat: [],
    generated: [],
    stoppedAt: 'ct_snat at 4. lr_in_unsnat on hz/alpha/dpu/dpu-1/gw',
  },
  {
    fixture: 'inbound-to-host',
    final: [{ port: 'hz/alpha/h1', type: '' }],
    drops: [],
    nat: [],
    generated: [],
  },
  {
    fixture: 'router-answers',
    final: [{ port: 'hz/alpha/h1', type: '' }],
    drops: [],
    nat: [],
    generated: [],
    answeredBy: 'hz/alpha/lr',
  },
]

for (const c of cases) {
  t.test(c.fixture, async (t) => {
    const trace = parseTrace(fixture(c.fixture))
    const ports = (os: { port: string; type: string }[]) =>
      os.map(({ port, type }) => ({ port, type }))
    t.same(ports(finalOutputs(trace)), c.final, 'where the traced packet leaves')
    const arp = trace.generated[0]?.action
    t.same(ports(arp ? finalOutputs(trace, arp) : []), c.finalGenerated ?? [], 'generated packets')
    t.same(
      trace.drops.map((d) => `${d.stage.table}. ${d.stage.name} on ${d.datapath}`),
      c.drops,
      'drops',
    )
    t.same(
      trace.nat.map((n) => `${n.kind} ${n.address} on ${n.datapath}`),
      c.nat,
      'NAT',
    )
    t.same(
      trace.generated.map((g) => `${g.action} for ${g.target} on ${g.datapath}`),
      c.generated,
      'generated',
    )
    t.equal(trace.answeredBy, c.answeredBy, 'answered by a router')
    t.equal(
      trace.stoppedAt &&
        `${trace.stoppedAt.action} at ${trace.stoppedAt.stage.table}. ${trace.stoppedAt.stage.name} on ${trace.stoppedAt.datapath}`,
      c.stoppedAt,
      'stopped',
    )
    t.same(trace.errors, [])
  })
}

t.test('the microflow line and stage lines are read field by field', async (t) => {
  const trace = parseTrace(fixture('outside-snat-tcp'))
  t.match(trace.microflow, {
    proto: 'tcp',
    dl_src: '0a:00:00:00:00:01',
    nw_src: '10.10.10.2',
    nw_dst: '8.8.8.8',
    tp_dst: '443',
  })
  const first = trace.sections[0]
  t.match(first, { kind: 'ingress', datapath: 'hz/alpha/ls', inport: 'hz/alpha/h1', depth: 0 })
  t.match(first?.stages[1], {
    table: 25,
    name: 'ls_in_l2_lkup',
    match: 'eth.dst == 0a:d1:14:bf:48:49',
    priority: 50,
    actions: ['outport = "hz/alpha/ls-lr";', 'output;'],
  })
  const snat = trace.sections.find((s) => s.title.startsWith('ct_snat('))
  t.match(snat, { kind: 'action', datapath: 'hz/alpha/dpu/dpu-1/gw' }, 'within its pipeline')
})

t.test('sections under a multicast group are nested', async (t) => {
  const trace = parseTrace(fixture('arp-unanswered'))
  const flood = trace.sections.find((s) => s.kind === 'multicast')
  t.match(flood, { datapath: 'hz/beta/ls', mcgroup: '_MC_flood', depth: 0 })
  const back = trace.sections.find((s) => s.outport === 'hz/beta/h1')
  t.match(back?.notes, [/omitting output because inport == outport/])
  t.equal(back?.depth, 4)
})

t.test('a stage with no matching flow is an implicit drop', async (t) => {
  // ovn-trace prints `%s%sno match (implicit drop)` when no flow of a table matches.
  const text = [
    '# ip,reg14=0x1,dl_src=0a:00:00:00:00:01,nw_src=10.0.0.2,nw_dst=10.0.0.3',
    '',
    'ingress(dp="hz/g/ls", inport="hz/g/h1")',
    '---------------------------------------',
    ' 3. ls_in_acl: no match (implicit drop)',
  ].join('\n')
  const trace = parseTrace(text)
  t.match(trace.drops, [{ datapath: 'hz/g/ls', stage: { table: 3, name: 'ls_in_acl' } }])
})

t.test('anything but a trace is refused', async (t) => {
  for (const text of ['unknown datapath "hz/g/nope"\n', '', 'ovn-trace: connection failed']) {
    t.throws(() => parseTrace(text), TraceOutputError, JSON.stringify(text))
  }
})

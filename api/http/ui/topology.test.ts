import t from 'tap'
import type { ManagedResource } from '../../../lib/model/objects.ts'
import { storedGroup, storedHost } from '../../../test/helpers/objects.ts'
import { TopologySvg, topologyModel } from './topology.tsx'

const group = (name = 'group-a') => storedGroup(name)

const host = (
  name: string,
  dpu: string,
  ip: string,
  extra: {
    access?: 'None' | 'FabricAccess' | 'PublicAccess'
    publicIp?: string
    phase?: 'Ready' | 'Attaching' | 'Failed'
    group?: string
  } = {},
): ManagedResource =>
  storedHost(
    name,
    {
      resourceGroup: extra.group ?? 'group-a',
      dpu: { id: dpu, ips: ['172.18.0.11', `172.18.0.1${dpu.slice(-1)}1`] },
      hostAccess: extra.access ?? 'None',
    },
    {
      phase: extra.phase ?? 'Ready',
      hostAccessIPs: { hostIP: ip, ...(extra.publicIp ? { publicIP: extra.publicIp } : {}) },
    },
  )

const cases: {
  name: string
  hosts: ManagedResource[]
  gateways: string[]
  nats: Record<string, string[]>
}[] = [
  { name: 'no hosts: no gateway router', hosts: [], gateways: [], nats: {} },
  {
    name: 'one gateway router per DPU in use, DPUs by id',
    hosts: [
      host('h2', 'dpu-2', '10.10.10.3'),
      host('h1', 'dpu-1', '10.10.10.2'),
      host('h3', 'dpu-1', '10.10.10.4'),
    ],
    gateways: ['dpu-1', 'dpu-2'],
    nats: {
      'dpu-1': ['snat 172.18.0.111 10.10.10.0/24'],
      'dpu-2': ['snat 172.18.0.121 10.10.10.0/24'],
    },
  },
  {
    name: 'public and fabric access: their NAT on their DPU',
    hosts: [
      host('h1', 'dpu-1', '10.10.10.2', { access: 'PublicAccess', publicIp: '203.0.113.7' }),
      host('h2', 'dpu-2', '10.10.10.3', { access: 'FabricAccess' }),
    ],
    gateways: ['dpu-1', 'dpu-2'],
    nats: {
      'dpu-1': [
        'snat 172.18.0.111 10.10.10.0/24',
        'dnat_and_snat 203.0.113.7 10.10.10.2',
        'dnat 172.18.0.111 10.10.10.2',
      ],
      'dpu-2': ['snat 172.18.0.121 10.10.10.0/24', 'dnat_and_snat 172.18.0.121 10.10.10.3'],
    },
  },
  {
    name: "another group's host is not drawn",
    hosts: [
      host('h1', 'dpu-1', '10.10.10.2'),
      host('x1', 'dpu-9', '10.10.10.2', { group: 'group-b' }),
    ],
    gateways: ['dpu-1'],
    nats: { 'dpu-1': ['snat 172.18.0.111 10.10.10.0/24'] },
  },
]

for (const c of cases) {
  t.test(c.name, async (t) => {
    const model = topologyModel(group(), c.hosts, [{ id: 'dpu-1', state: 'Online' }])
    t.same(
      model.gateways.map((g) => g.dpu),
      c.gateways,
    )
    for (const g of model.gateways) {
      t.same(
        g.nats.map((n) => `${n.type} ${n.external} ${n.logical}`),
        c.nats[g.dpu],
        `NAT on ${g.dpu}`,
      )
      t.equal(g.router, `hz/group-a/dpu/${g.dpu}/gw`, 'named as in NB')
    }
    const svg = String(await TopologySvg({ model }))
    t.equal(svg.match(/data-kind="gateway-router"/g)?.length ?? 0, c.gateways.length)
    t.equal(svg.match(/data-kind="router"/g)?.length, 1)
    t.equal(svg.match(/data-kind="switch"/g)?.length, 1)
    t.equal(
      svg.match(/data-kind="host"/g)?.length ?? 0,
      c.hosts.filter((h) => h.spec.resourceGroup === 'group-a').length,
    )
    t.equal(
      svg.match(/<title/g)?.length,
      3 + model.gateways.length + model.gateways.reduce((n, g) => n + g.hosts.length, 0),
      'every node has a title',
    )
  })
}

t.test('phases and DPU states, as words beside the colour', async (t) => {
  const model = topologyModel(
    group(),
    [
      host('h1', 'dpu-1', '10.10.10.2', { phase: 'Attaching' }),
      host('h2', 'dpu-2', '10.10.10.3', { phase: 'Failed' }),
    ],
    [{ id: 'dpu-1', state: 'Online' }],
  )
  t.same(
    model.gateways.map((g) => g.state),
    ['Online', 'Unknown'],
    'a DPU never heard of is Unknown',
  )
  const svg = String(await TopologySvg({ model }))
  t.match(svg, /data-host="h1" data-dpu="dpu-1" data-object="host\/h1" data-phase="Attaching"/)
  t.match(svg, />Failed</, 'the phase is written, not only coloured')
})

t.test('names are escaped', async (t) => {
  const g = group()
  const model = topologyModel(g, [host('h1', 'dpu-1', '10.10.10.2')], [])
  const tampered = { ...model, switch: { ...model.switch, name: '<script>x</script>' } }
  const svg = String(await TopologySvg({ model: tampered }))
  t.notMatch(svg, /<script>/)
  t.match(svg, /&lt;script&gt;/)
})

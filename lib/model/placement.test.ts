import t from 'tap'
import * as v from 'valibot'
import { type Dpu, type DpuSpec, ManagedResourceRequest, type ResourceGroup } from './objects.ts'
import { type Caller, placeHost } from './placement.ts'

const group = {
  name: 'group-a',
  spec: { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } },
  specVersion: 1,
  status: {},
  createdAt: '',
  updatedAt: '',
} as unknown as ResourceGroup

const dpu = (spec: Partial<DpuSpec> = {}): Dpu => ({
  name: 'dpu-1',
  spec: {
    tenantId: 'tenant-a',
    fabricIps: ['172.18.0.11', '172.18.0.111'],
    hostPorts: ['pf0hpf'],
    ...spec,
  },
  specVersion: 4,
  status: { hosts: [] },
  createdAt: '',
  updatedAt: '',
})

const request = (extra: Record<string, unknown> = {}) =>
  v.parse(ManagedResourceRequest, {
    resourceGroup: 'group-a',
    hostMAC: '52:54:00:00:00:01',
    dpu: { id: 'dpu-1' },
    ...extra,
  })

const tenantA: Caller = { kind: 'tenant', tenant: 'tenant-a' }
const tenantB: Caller = { kind: 'tenant', tenant: 'tenant-b' }
const operator: Caller = { kind: 'operator' }

t.test('a tenant gets its DPU facts from the inventory', async (t) => {
  const placed = placeHost(request({ hostAccess: 'FabricAccess' }), group, dpu(), tenantA)
  t.ok(placed.ok)
  if (!placed.ok) return
  t.same(placed.spec.dpu, { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'] })
  t.equal(placed.spec.identifier, 'pf0hpf', 'the only host port, when none is named')
  t.equal(placed.dpuChange, undefined, 'a tenant never changes the inventory')
})

t.test('what a tenant may not do, and the field each refusal names', async (t) => {
  const cases: [string, ReturnType<typeof request>, Dpu | undefined, Caller, string, RegExp][] = [
    [
      'give fabric IPs (NAT IP hijack)',
      request({ dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.250'] } }),
      dpu(),
      tenantA,
      'dpu.ips',
      /inventory/,
    ],
    [
      'give an IPv6 NAT address',
      request({ dpu: { id: 'dpu-1', natIp6: 'fd00:fab::65' } }),
      dpu({ natIp6: 'fd00:fab::65' }),
      tenantA,
      'dpu.natIp6',
      /inventory/,
    ],
    [
      "name another tenant's DPU (host hijack)",
      request(),
      dpu({ tenantId: 'tenant-b' }),
      tenantA,
      'dpu.id',
      /no DPU dpu-1 is assigned to tenant tenant-a/,
    ],
    ['name a DPU not in the inventory', request(), undefined, tenantA, 'dpu.id', /no DPU dpu-1/],
    [
      'name an unassigned DPU',
      request(),
      dpu({ tenantId: undefined }),
      tenantA,
      'dpu.id',
      /no DPU dpu-1/,
    ],
    [
      'name a port the DPU does not list (uplink capture)',
      request({ identifier: 'p0' }),
      dpu(),
      tenantA,
      'identifier',
      /one of DPU dpu-1's host ports: pf0hpf/,
    ],
    [
      'leave the port out when the DPU has several',
      request(),
      dpu({ hostPorts: ['pf0hpf', 'pf1hpf'] }),
      tenantA,
      'identifier',
      /several host ports/,
    ],
    [
      'attach to a DPU with no host ports',
      request(),
      dpu({ hostPorts: [] }),
      tenantA,
      'identifier',
      /no host ports/,
    ],
    [
      'ask for FabricAccess on a DPU without a NAT IP',
      request({ hostAccess: 'FabricAccess' }),
      dpu({ fabricIps: ['172.18.0.11'] }),
      tenantA,
      'hostAccess',
      /needs a NAT IP/,
    ],
  ]
  for (const [what, req, inventory, caller, path, message] of cases) {
    const placed = placeHost(req, group, inventory, caller)
    t.notOk(placed.ok, what)
    if (placed.ok) continue
    const issue = placed.issues.find((i) => i.path === path)
    t.ok(issue, `${what}: names ${path}`)
    t.match(issue?.message, message, what)
  }
  // Another tenant's DPU and a missing one read the same: the answer tells nothing.
  const other = placeHost(request(), group, dpu({ tenantId: 'tenant-a' }), tenantB)
  const missing = placeHost(request(), group, undefined, tenantB)
  t.same(other, missing, "another tenant's DPU looks exactly like a missing one")
})

t.test('an operator may give everything in one request', async (t) => {
  const added = placeHost(
    request({ dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'] }, identifier: 'eth1' }),
    group,
    undefined,
    operator,
  )
  t.ok(added.ok)
  if (!added.ok) return
  t.same(
    added.dpuChange,
    { tenantId: 'tenant-a', fabricIps: ['172.18.0.11', '172.18.0.111'], hostPorts: ['eth1'] },
    "a DPU missing from the inventory is added, assigned to the group's tenant",
  )
  t.equal(added.spec.identifier, 'eth1')

  const newPort = placeHost(request({ identifier: 'pf1hpf' }), group, dpu(), operator)
  t.ok(newPort.ok)
  if (newPort.ok) t.same(newPort.dpuChange?.hostPorts, ['pf0hpf', 'pf1hpf'], 'a new port is learnt')

  const same = placeHost(
    request({ dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'] } }),
    group,
    dpu(),
    operator,
  )
  t.ok(same.ok, 'fabric IPs that agree with the inventory are fine')
  if (same.ok) t.equal(same.dpuChange, undefined, 'and change nothing')

  const disagree = placeHost(
    request({ dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.99'] } }),
    group,
    dpu(),
    operator,
  )
  t.notOk(disagree.ok, 'fabric IPs that disagree with the inventory are refused')
  const foreign = placeHost(request(), group, dpu({ tenantId: 'tenant-b' }), operator)
  t.notOk(foreign.ok, "even an operator cannot put a group's host on another tenant's DPU")
  const unknown = placeHost(request(), group, undefined, operator)
  t.notOk(unknown.ok, 'a DPU neither in the inventory nor described is refused')
  const v6 = dpu({ natIp6: 'fd00:fab::65' })
  const fromInventory = placeHost(request(), group, v6, tenantA)
  t.same(
    fromInventory.ok && fromInventory.spec.dpu,
    { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'], natIp6: 'fd00:fab::65' },
    "the DPU's IPv6 NAT address comes from the inventory",
  )
  const natIp6 = (value: string) =>
    placeHost(request({ dpu: { id: 'dpu-1', natIp6: value } }), group, v6, operator)
  t.ok(natIp6('FD00:FAB::65').ok, "an operator's natIp6 agreeing with it (any spelling)")
  t.match(
    natIp6('fd00:fab::99'),
    { ok: false, issues: [{ path: 'dpu.natIp6', message: /fd00:fab::65/ }] },
    'one disagreeing is refused, naming dpu.natIp6',
  )
  const noPorts = placeHost(request(), group, dpu({ hostPorts: [] }), operator)
  t.ok(noPorts.ok, "an operator may leave the port to the agent's default")
  if (noPorts.ok) t.equal(noPorts.spec.identifier, undefined)
})

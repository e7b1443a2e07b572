/**
 * Where every group's Southbound admits DPUs by address (`HYDRAZINE_K8S_DPU_CIDRS`), no
 * DPU may have a NAT address inside those CIDRs: its tenant hosts leave from it and would
 * reach every group's SB. On the API over a real Redis: the DPU inventory's PUT and a
 * host request that teaches the inventory a DPU are refused, naming the field and the
 * setting, and store nothing; a controller whose stored inventory already holds such a
 * DPU refuses to start.
 */
import t from 'tap'
import { refuseAdmittedNatIps } from '../../infra/service.ts'
import { ConfigError } from '../../lib/errors.ts'
import { jsonCaller } from '../helpers/http.ts'
import { groupSpec, hostSpec } from '../helpers/requests.ts'
import { startContract } from './contract.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
/** The DPUs' encap addresses only (172.18.0.0-63); their NAT addresses are .110 and up. */
const ADMITTED = ['172.18.0.0/26']

t.test("a DPU's NAT address inside the Southbounds' admitted CIDRs is refused", async (t) => {
  const c = await startContract(t, { policy: { dhcpServers: [], southboundCidrs: ADMITTED } })
  const { app } = c.app({ operator: [OPERATOR], tenants: {} })
  const call = jsonCaller(app, OPERATOR)

  const good = await call('PUT', '/v1/dpus/dpu-1', {
    fabricIps: ['172.18.0.11', '172.18.0.111'],
    hostPorts: ['pf0hpf'],
  })
  t.ok(good.status < 300, `encap inside, NAT outside: stored (${good.status})`)

  const before = await c.snapshot()
  const bad = await call('PUT', '/v1/dpus/dpu-2', {
    fabricIps: ['172.18.0.12', '172.18.0.40'],
    hostPorts: ['pf0hpf'],
  })
  t.equal(bad.status, 400)
  t.equal(bad.json.error.code, 'INVALID')
  t.match(bad.json.error.issues, [
    {
      path: 'fabricIps[1]',
      message:
        /NAT address 172\.18\.0\.40 is inside 172\.18\.0\.0\/26, which HYDRAZINE_K8S_DPU_CIDRS admits/,
    },
  ])
  t.same(await c.snapshot(), before, 'nothing stored')

  t.equal((await call('PUT', '/v1/resource-groups/group-a', groupSpec())).status, 202)
  const learning = await call('PUT', '/v1/managed-resources/host-1', {
    ...hostSpec('group-a', 'dpu-3', 1),
    dpu: { id: 'dpu-3', ips: ['172.18.0.13', '172.18.0.41'] },
  })
  t.equal(learning.status, 400, 'a host request teaching the inventory such a DPU: refused')
  t.match(learning.json.error.issues, [{ path: 'dpu.ips[1]', message: /HYDRAZINE_K8S_DPU_CIDRS/ }])
  t.equal(await c.store.dpus.get('dpu-3'), undefined, 'the DPU was not added')
  t.equal(await c.store.hosts.get('host-1'), undefined, 'nor the host')

  await t.resolves(refuseAdmittedNatIps(c.store, ADMITTED), 'the inventory as stored: starts')
  // Stored before the CIDRs were set (here: past the API).
  await c.store.dpus.put('dpu-9', { fabricIps: ['172.18.0.19', '172.18.0.50'], hostPorts: [] })
  const refused = await refuseAdmittedNatIps(c.store, ADMITTED).catch((e: unknown) => e)
  t.type(refused, ConfigError, 'a stored DPU inside them: the controller refuses to start')
  t.match(
    String((refused as Error).message),
    /DPU dpu-9's NAT address 172\.18\.0\.50 \(in 172\.18\.0\.0\/26\)/,
  )
})

import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { startWorkerProcess, stopProcess } from './scenarios.ts'

t.test('100 hosts attached to one group at once by 2 worker processes are all Ready', async (t) => {
  const p = await startPipeline(t)
  await p.controller.worker.close()
  const dpus = Array.from({ length: 10 }, (_, i) => `dpu-${i}`)
  for (const dpu of dpus) await p.agent(dpu)
  const workers = [startWorkerProcess(p), startWorkerProcess(p)]
  t.teardown(() => {
    for (const w of workers) stopProcess(w.child)
  })
  await Promise.all(workers.map((w) => w.ready))

  await p.client.applyGroup('group-a', groupSpec('tenant-a', '10.20.0.0/16', '10.20.0.1'))
  const names = Array.from({ length: 100 }, (_, i) => `host-${i}`)
  await Promise.all(
    names.map((name, i) =>
      p.client.applyHost(name, {
        ...hostSpec('group-a', dpus[i % dpus.length] ?? 'dpu-0', i),
        hostMAC: `52:54:00:01:00:${i.toString(16).padStart(2, '0')}`,
        dpu: {
          id: dpus[i % dpus.length],
          // An encap IP and a NAT IP: hosts leave the group through their DPU's NAT.
          ips: [`172.18.1.${i % dpus.length}`, `172.18.2.${i % dpus.length}`],
        },
      }),
    ),
  )
  const hosts = await until(
    () => p.controller.store.hosts.list({ resourceGroup: 'group-a' }),
    (hs) => hs.length === 100 && hs.every((h) => h.status.phase === 'Ready'),
    90_000,
  )
  t.equal(hosts.filter((h) => h.status.phase === 'Ready').length, 100, 'all 100 are Ready')
  for (const h of hosts.filter((h) => h.status.phase !== 'Ready'))
    t.comment(JSON.stringify(h.status))

  const ports = (await p.nbctl('lsp-list', topologyNames.switch('group-a')))
    .split('\n')
    .filter((l) => /host-/.test(l))
  t.equal(ports.length, 100, 'every host has its port on the group switch: no update was lost')
  const addresses = new Set(hosts.map((h) => h.status.hostAccessIPs?.hostIP))
  t.equal(addresses.size, 100, '100 distinct addresses')
  const policies = (await p.nbctl('lr-policy-list', topologyNames.router('group-a')))
    .split('\n')
    .filter((l) => /reroute/.test(l))
  t.equal(policies.length, dpus.length, 'one reroute policy per DPU')
  const sets = (
    await p.nbctl(
      '--bare',
      '--columns=addresses',
      'find',
      'Address_Set',
      `external_ids:"hydrazine:group"=group-a`,
    )
  )
    .split(/\s+/)
    .filter((a) => a !== '')
  t.same(
    [...new Set(sets)].sort(),
    [...addresses].sort(),
    "each host's address is in its DPU's address set, which its DPU's reroute matches",
  )
  const routers = (await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Router'))
    .split('\n')
    .filter((l) => /\/gw$/.test(l))
  t.equal(routers.length, dpus.length, 'one gateway router per DPU')
})

import t from 'tap'
import type { DpuView } from '../../../../app/index.ts'
import { DpuPage } from './dpus.tsx'

const dpu: DpuView = {
  id: 'dpu1',
  spec: { fabricIps: ['172.18.0.11'], hostPorts: ['pf0hpf', 'pf1hpf', 'pf0vf0'] },
  specVersion: 2,
  state: 'Online',
  hosts: ['h1'],
  ports: [
    { port: 'pf0hpf', network: 'tenant', group: 'group-a', host: 'h1', phase: 'Ready' },
    {
      port: 'pf1hpf',
      network: 'admin',
      group: 'admin',
      host: 'admin-dpu1-pf1hpf',
      phase: 'Detaching',
    },
    { port: 'pf0vf0', network: 'none', reason: 'DPU dpu1 serves group group-a' },
  ],
}

t.test("a DPU's page says which network each host port is on", async (t) => {
  const frame = { principal: { kind: 'operator' as const }, csrf: 'x' }
  const html = String(await DpuPage({ frame, dpu, events: [] }))
  const row = (port: string) =>
    new RegExp(`<tr data-port="${port}"[^<]*>[\\s\\S]*?</tr>`).exec(html)?.[0] ?? ''
  t.match(
    row('pf0hpf'),
    /data-network="tenant"[\s\S]*?tenant group group-a[\s\S]*?href="\/ui\/hosts\/h1"[\s\S]*?>Ready</,
  )
  t.match(
    row('pf1hpf'),
    /data-network="admin"[\s\S]*?admin network \(admin\)[\s\S]*?admin-dpu1-pf1hpf[\s\S]*?>Detaching</,
  )
  t.match(row('pf0vf0'), /data-network="none"[\s\S]*?none \(isolated\)[\s\S]*?serves group group-a/)
  const without = String(await DpuPage({ frame, dpu: { ...dpu, ports: [] }, events: [] }))
  t.match(without, /No host ports in the inventory/)
})

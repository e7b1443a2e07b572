import t from 'tap'
import { createDpu, createFabric, labPrefix, run } from '../../infra/lab/dpu.ts'
import { tempDir } from '../helpers/stack.ts'

t.test('a simulated DPU reaches the fabric over br-phy and holds a host veth', async (t) => {
  const dataDir = await tempDir(t, 'hz-lab-')
  const fabric = await createFabric({ prefix: labPrefix() })
  t.teardown(() => fabric.destroy())
  const dpu = await createDpu({ fabric, name: 'dpu1', dataDir })
  t.teardown(() => dpu.destroy())

  t.match(await dpu.vsctl('get', 'Bridge', 'br-phy', 'datapath_type'), /netdev/)
  t.match(await dpu.vsctl('list-ports', 'br-phy'), /eth0/)
  // ICMP from the DPU namespace to the fabric gateway crosses br-phy's userspace datapath.
  const ping = await run('ip', ['netns', 'exec', dpu.netns, 'ping', '-c1', '-W2', fabric.gatewayIp])
  t.match(ping, /1 received/)

  const host = await dpu.addHost({ name: 'h1', mac: '0a:00:00:00:00:01' })
  const links = await run('ip', ['-n', dpu.netns, '-br', 'link'])
  t.match(links, new RegExp(`^${host.hostPort}@`, 'm'), 'host port is in the DPU namespace')
  t.match(await run('ip', ['-n', host.netns, 'link', 'show', 'eth0']), /0a:00:00:00:00:01/)

  await dpu.destroy()
  t.notMatch(await run('ip', ['netns', 'list']), dpu.netns, 'teardown removes the namespace')
})

/**
 * Version skew between a group's ovn-northd and its DPUs' ovn-controller: OVN upgrades
 * ovn-controller first, so a DPU whose agent reports an older OVN release than its group's
 * northd is refused before anything is written for its host; the same or newer is served.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

t.test("a DPU whose ovn-controller is older than its group's ovn-northd is refused", async (t) => {
  const p = await startPipeline(t, { perGroup: true })
  const protocolVersions = ['1.0', '2.0']
  await p.agent('dpu-1', { protocolVersions, ovnVersion: '22.03.0' })
  await p.agent('dpu-2', { protocolVersions, ovnVersion: '23.03.1' })
  await p.client.applyGroup('group-a', groupSpec('tenant-a', '10.10.10.0/24', '10.10.10.1'))
  await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.phase === 'Ready',
  )

  await p.client.applyHost('old', hostSpec('group-a', 'dpu-1', 1))
  await p.client.applyHost('current', hostSpec('group-a', 'dpu-2', 2))
  const old = await until(
    () => p.client.getHost('old'),
    (h) => h?.status.phase === 'Failed',
  )
  const refused = old?.status.conditions.find((c) => c.type === 'AgentConfigured')
  t.equal(refused?.reason, 'OvnControllerTooOld', 'the host says why')
  t.match(
    refused?.message,
    /DPU dpu-1's ovn-controller 22\.03\.0 is older than group group-a's ovn-northd 23\.03\.\d+/,
    'naming both versions',
  )
  const current = await until(
    () => p.client.getHost('current'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(current?.status.phase, 'Ready', 'a DPU of the same release is served')
  // The group's central runs from its first host on.
  const nb = (await p.client.getGroup('group-a'))?.status.ovnCentral?.nb ?? ''
  const { stdout: ports } = await promisify(execFile)('ovn-nbctl', [
    `--db=${nb}`,
    'lsp-list',
    topologyNames.switch('group-a'),
  ])
  t.notMatch(ports, topologyNames.hostPort('group-a', 'old'), 'no port for the refused host')
  t.match(ports, topologyNames.hostPort('group-a', 'current'))
})

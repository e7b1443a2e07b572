/**
 * A group spec change reaches its hosts' DPUs only when it changes what they are sent
 * (its networks, its DHCP server): a new security policy or DNS setting is NB's alone,
 * and leaves the hosts Ready at their attempt, with no new `configure` for their DPU; a
 * dry run plans the same.
 */
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { jsonCaller } from '../helpers/http.ts'
import { OPERATOR, TEST_TOKENS } from '../helpers/tokens.ts'
import { DHCP_SERVER, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

t.test('only a change members are sent reconfigures them', async (t) => {
  const p = await startPipeline(t)
  const agent = await p.agent('dpu-1')
  const configures = () => agent.jobs.filter((j) => j.name === 'configure').length
  const groupAt = (version: number) =>
    until(
      () => p.controller.store.groups.get('group-m'),
      (g) => g?.status.phase === 'Ready' && g.status.observedVersion === version,
    )
  const host = () => p.controller.store.hosts.get('host-1')
  const reasons = async () => (await p.client.events('mr', 'host-1', 50)).map((e) => e.reason)

  await p.client.applyGroup('group-m', groupSpec('tenant-m'))
  await p.client.applyHost('host-1', hostSpec('group-m', 'dpu-1', 1))
  await until(host, (h) => h?.status.phase === 'Ready')
  t.equal(configures(), 1, "the DPU was sent the host's configure once")

  const policies = [
    { name: 'no-ssh', direction: 'ingress', action: 'deny', protocol: 'tcp', ports: '22' },
  ]
  const call = jsonCaller(
    createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
    OPERATOR,
  )
  const planned = async (spec: object) => {
    const plan = await call('PUT', '/v1/resource-groups/group-m?dryRun=true', spec)
    return (plan.json as { agentJobs: { job: string; host: string }[] }).agentJobs
  }
  t.same(
    await planned({ ...groupSpec('tenant-m'), policies }),
    [],
    'a dry run of the policy change plans no configure',
  )
  t.match(
    await planned({ ...groupSpec('tenant-m'), dhcpServer: DHCP_SERVER }),
    [{ job: 'configure', host: 'host-1' }],
    "a dry run of a DHCP server plans the host's configure",
  )
  await p.client.applyGroup('group-m', {
    ...groupSpec('tenant-m'),
    policies,
    dns: { enabled: false },
  })
  t.ok(await groupAt(2), 'a policy and DNS off: the group is Ready at spec version 2')
  const after = await host()
  t.equal(after?.status.phase, 'Ready', 'the host stays Ready')
  t.equal(after?.status.attempt ?? 1, 1, 'at its first attempt')
  t.notOk((await reasons()).includes('GroupChanged'), 'its events have no GroupChanged')
  t.equal(configures(), 1, 'and its DPU was sent nothing new')

  await p.client.applyGroup('group-m', {
    ...groupSpec('tenant-m'),
    policies,
    dhcpServer: DHCP_SERVER,
  })
  t.ok(await groupAt(3), 'a DHCP server: the group is Ready at spec version 3')
  const redriven = await until(
    host,
    (h) => h?.status.phase === 'Ready' && (h.status.attempt ?? 1) === 2,
  )
  t.equal(redriven?.status.attempt, 2, 'the host was re-driven (attempt 2) and is Ready')
  t.ok((await reasons()).includes('GroupChanged'), 'saying the group changed')
  t.equal(configures(), 2, 'its DPU was sent the relay settings')

  await p.client.applyGroup('group-m', {
    ...groupSpec('tenant-m'),
    dhcpServer: DHCP_SERVER,
  })
  t.ok(await groupAt(4), 'the policy removed: spec version 4')
  t.equal((await host())?.status.attempt, 2, 'no new attempt for that')
})

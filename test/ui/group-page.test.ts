/**
 * The admin UI's group page on a running system, over plain HTTP: its gateway routers
 * take their colour from the state of the DPUs the group uses, however many DPUs the
 * system has.
 */
import t from 'tap'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { OPERATOR, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, startPipeline } from '../pipeline/fixtures.ts'
import { heartbeat } from '../pipeline/stand-in-agent.ts'
import { serveApp } from './browser.ts'
import { signIn } from './live-client.ts'

t.test("a gateway router shows its DPU's state past the first 1,000 DPUs", async (t) => {
  const p = await startPipeline(t)
  // 1,000 DPUs whose ids sort before the group's own, all beating.
  const beats = new Heartbeats(p.controller.redis)
  const others = Array.from({ length: 1000 }, (_, i) => `dpu-${String(i).padStart(4, '0')}`)
  await Promise.all(others.map((id) => beats.write(heartbeat(id, ['1.0', '2.0']), 120_000)))
  await p.agent('dpu-z', { protocolVersions: ['1.0', '2.0'] })
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  await p.client.applyHost('host-a1', hostSpec('group-a', 'dpu-z', 1))

  const base = await serveApp(t, {
    readiness: {},
    ui: { client: p.client, tokens: TEST_TOKENS },
  })
  const { cookie } = await signIn(base, OPERATOR)
  const res = await fetch(`${base}/ui/groups/group-a`, { headers: { cookie } })
  const html = await res.text()
  t.equal(res.status, 200)
  t.match(
    /<g id="topology-gw-dpu-z"[^>]*>/.exec(html)?.[0],
    /data-phase="Online"/,
    "dpu-z's gateway router is Online, as dpu-z is",
  )
})

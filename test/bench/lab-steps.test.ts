/** The lab bench's step arithmetic: each step from the latest of its moments, the slowest first. */
import t from 'tap'
import { type AttachMoments, slowestAttaches, stepDurations } from './lab-steps.ts'

/** An attach whose moments follow its PUT at 0 by these offsets (ms). */
const attach = (host: string, offsets: Partial<Omit<AttachMoments, 'host' | 'put'>>) => ({
  host,
  put: 0,
  accepted: undefined,
  committed: undefined,
  northd: undefined,
  agentTook: undefined,
  plugged: undefined,
  bound: undefined,
  installed: undefined,
  acked: undefined,
  ready: undefined,
  ...offsets,
})

const quick = attach('h1-1', {
  accepted: 10,
  committed: 30,
  northd: 40,
  agentTook: 35,
  plugged: 50,
  bound: 60,
  installed: 70,
  acked: 75,
  ready: 90,
})
const slow = attach('h2-0', {
  accepted: 10,
  committed: 30,
  northd: 40,
  agentTook: 60,
  plugged: 100,
  bound: 2100,
  installed: 3000,
  acked: 3010,
  ready: 3500,
})

t.test('each step runs from the latest of the moments it waits for', async (t) => {
  const steps = Object.fromEntries(stepDurations([slow]).map((s) => [s.name, s.durations]))
  t.same(steps.sb_bind, [2000], 'the SB bind waits for the port plugged, the later of the two')
  t.same(steps.agent_port, [40])
  t.same(steps.ready, [490])
})

t.test('the slowest attaches first, each step named with its duration', async (t) => {
  const never = attach('h3-0', { accepted: 10 })
  const lines = slowestAttaches([quick, slow, never], 2)
  t.equal(lines.length, 2)
  t.match(lines[0], /^h3-0 never Ready: api 10, nb_commit -/, 'one never Ready first')
  t.equal(
    lines[1],
    'h2-0 3500 ms: api 10, nb_commit 20, northd 10, agent_job 30, agent_port 40, sb_bind 2000, flows_installed 900, ack 10, ready 490',
  )
})

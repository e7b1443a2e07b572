/**
 * A dead DPU agent is visible, and a DPU that lost a host's port gets it back, proven on
 * the lab with the real agent (heartbeat every second) and Hydrazine as `npm start` runs
 * it (its `dpu.health` every 250 ms):
 *
 * - the agent process is SIGKILLed: within 3 heartbeat intervals the host on its DPU
 *   carries `DpuHealthy=False HeartbeatLost` and stays Ready, and `GET /v1/dpus/{id}`
 *   says `Lost` with its last heartbeat; the same agent started again (same flags and
 *   credentials, as a supervisor would) makes it `DpuHealthy=True` again, the DPU `Online`;
 * - the host's port is deleted on the DPU by hand (`ovs-vsctl del-port`): the controller
 *   sees it missing from the agent's heartbeat, sends `configure` again, the port is back
 *   and the host Ready, reaching its gateway, and the repair is listed in
 *   `GET /v1/managed-resources/{name}/events`.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { agentRunDir } from '../../infra/lab/dpu-agent.ts'
import { type Lab, type LabDpu, startLab } from '../../infra/lab/lab.ts'
import { eventually, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { processesMentioning } from '../helpers/processes.ts'
import { attachHost, hostReady } from './api.ts'
import { labTest } from './lab-test.ts'

const INTERVAL_MS = 1000 // the lab's agents: --heartbeat-ms 1000
const repo = fileURLToPath(new URL('../..', import.meta.url))

interface Condition {
  type: string
  status: string
  reason: string
  message: string
  lastTransitionTime: string
}
interface Host {
  status?: { phase?: string; attempt?: number; conditions?: Condition[] }
}

/** The DPU's agent process (not its reaper): its pid, argv and `REDIS_URL`. */
async function agentProcess(dpu: LabDpu) {
  const lines = (await processesMentioning(agentRunDir(dpu.sim))).filter(
    (l) => l.includes('agent/main.ts') && !l.includes('reaper.sh'),
  )
  const pid = Number(lines[0]?.split(/\s+/)[0])
  if (lines.length !== 1 || !(pid > 0)) throw new Error(`one agent of ${dpu.id} expected: ${lines}`)
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter((a) => a)
  const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0')
  const redisUrl = environ.find((e) => e.startsWith('REDIS_URL='))?.slice('REDIS_URL='.length)
  if (!redisUrl) throw new Error(`the agent of ${dpu.id} has no REDIS_URL`)
  return { pid, argv, redisUrl }
}

async function host(lab: Lab, name: string): Promise<Host> {
  return (await lab.api('GET', `/v1/managed-resources/${name}`)).body as Host
}
const dpuHealthy = (h: Host) => h.status?.conditions?.find((c) => c.type === 'DpuHealthy')

async function dpuState(lab: Lab, id: string): Promise<{ state?: string; lastHeartbeat?: string }> {
  return (await lab.api('GET', `/v1/dpus/${id}`)).body as { state?: string }
}

await labTest(
  'a dead agent shows on its hosts, and a lost port is bound again',
  async (t: Test) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-'))
    let lab: Lab | undefined
    let restarted: Daemon | undefined
    t.teardown(async () => {
      await restarted?.stop()
      await lab?.stop()
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
    })
    lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 1 })
    const l = lab
    const [dpu] = l.dpus
    if (!dpu) throw new Error('one DPU expected')

    const put = await l.api('PUT', '/v1/resource-groups/group-h', {
      tenantId: 'tenant-h',
      network: { cidr: '10.50.1.0/24', gateway: '10.50.1.1' },
    })
    t.ok(put.status < 300, `PUT group-h → ${put.status}`)
    const h = await l.addHost({
      dpu: 1,
      name: 'h',
      mac: '0a:00:00:05:00:01',
      ipCidr: '10.50.1.11/24',
    })
    const attached = await attachHost(l, h, 'group-h', '10.50.1.11')
    t.ok(attached.status < 300, `attach h → ${attached.status}`)
    t.ok(await hostReady(l, 'h'), 'h is Ready')
    t.ok(await eventually(() => pings(h.netns, '10.50.1.1'), 20_000), 'h reaches its gateway')
    t.equal((await dpuState(l, dpu.id)).state, 'Online', `${dpu.id} is Online`)

    await t.test('its agent SIGKILLed: DpuHealthy=False within 3 intervals', async (t) => {
      const agent = await agentProcess(dpu)
      const killedAt = Date.now()
      process.kill(agent.pid, 'SIGKILL')
      let seen: Host = {}
      const marked = await eventually(
        async () => {
          seen = await host(l, 'h')
          return dpuHealthy(seen)?.status === 'False'
        },
        15_000,
        100,
      )
      t.ok(marked, 'h carries DpuHealthy=False')
      const condition = dpuHealthy(seen)
      t.match(condition, { reason: 'HeartbeatLost', message: /no heartbeat from DPU dpu1 since / })
      const after = Date.parse(condition?.lastTransitionTime ?? '') - killedAt
      t.ok(
        after <= 3 * INTERVAL_MS,
        `${after} ms after the kill (≤ 3 intervals of ${INTERVAL_MS} ms)`,
      )
      t.equal(seen.status?.phase, 'Ready', 'h stays Ready')
      const state = await dpuState(l, dpu.id)
      t.equal(state.state, 'Lost', `${dpu.id} is Lost`)
      t.ok(Date.parse(state.lastHeartbeat ?? '') <= killedAt, 'its last heartbeat: before the kill')

      // As a supervisor would: the same agent again, with its flags and credentials.
      const [command, ...args] = agent.argv
      restarted = await startDaemon({
        name: `agent(${dpu.id}) again`,
        command: command ?? process.execPath,
        args,
        cwd: repo,
        env: { REDIS_URL: agent.redisUrl },
        netns: dpu.sim.netns,
        logFile: join(dpu.sim.dataDir, 'agent-restarted.log'),
        ready: async () => (await dpuState(l, dpu.id)).state === 'Online',
        readyTimeoutMs: 30_000,
      })
      const back = await eventually(
        async () => {
          seen = await host(l, 'h')
          return dpuHealthy(seen)?.status === 'True'
        },
        15_000,
        100,
      )
      t.not((await agentProcess(dpu)).pid, agent.pid, 'a new agent process beats')
      t.ok(back, 'restarted: h carries DpuHealthy=True')
      t.match(dpuHealthy(seen), { reason: 'HeartbeatResumed' })
      t.equal(seen.status?.phase, 'Ready', 'h still Ready')
    })

    await t.test('its port deleted on the DPU by hand: bound again', async (t) => {
      await dpu.sim.vsctl('del-port', 'br-int', h.hostPort)
      t.notMatch(await dpu.sim.vsctl('list-ports', 'br-int'), h.hostPort, 'the port is gone')
      const repaired = await eventually(
        async () => {
          const now = await host(l, 'h')
          return now.status?.phase === 'Ready' && (now.status.attempt ?? 1) > 1
        },
        60_000,
        200,
      )
      t.ok(repaired, 'h is Ready again, on a new attempt')
      t.match(await dpu.sim.vsctl('list-ports', 'br-int'), h.hostPort, 'the port is back on br-int')
      t.ok(
        await eventually(() => pings(h.netns, '10.50.1.1'), 20_000),
        'h reaches its gateway again',
      )
      const events = (await l.api('GET', '/v1/managed-resources/h/events')).body as {
        items: { reason: string; message: string }[]
      }
      t.ok(
        events.items.some(
          (e) =>
            e.reason === 'PortLost' && e.message.includes(topologyNames.hostPort('group-h', 'h')),
        ),
        `the repair is in h's events: ${events.items.map((e) => e.reason).join(', ')}`,
      )
    })
  },
)

/**
 * A Fabric group's life beyond attach and detach, on the simulated data centre with real
 * packets, real BGP EVPN and real DHCP (dnsmasq standing in for Carbide's server):
 *
 * - DHCP: fab-d has a `dhcpServer`; hosts d1 (dpu1) and d2 (dpu2) get the addresses IPAM
 *   chose by DHCP, through the relay on the group's interface in each DPU's VRF, and the
 *   server logs option 82 with circuit id `vlan<N>` (N the group's VLAN id);
 * - drift: d1's /32 deleted by hand in its VRF, and d2's VRF removed behind dpu2's agent's
 *   back (built again with the same router MAC, its VTEP's): the controller sees them
 *   missing from the heartbeats, configures the hosts again (a `RouteLost` event), and the reflector holds both /32s again; a VRF of a group
 *   the controller does not know (a `configure` put straight on dpu1's queue) is isolated
 *   and removed (`StrayVrfIsolated`);
 * - a silent zebra: dpu1's zebra frozen (SIGSTOP), a new host d4's configure waits for an
 *   announcement that does not come; d4's detach, queued behind it, ends the wait, and d4
 *   is gone within seconds, not after the agent's install timeout;
 * - agent restart: dpu1's agent SIGKILLed (its FRR and relay die with it, the reflector
 *   loses d1's /32) and started again announces d1's /32 again by itself (no repair:
 *   d1 keeps its attempt), and d1 reaches d2 again;
 * - FRR restart: dpu2's bgpd SIGKILLed; the controller sees d2's /32 missing and configures
 *   d2 again, and the agent starts FRR again with the VRF configured in it (the agent
 *   otherwise keeps what it configured once);
 * - forced detach: dpu2's agent frozen (SIGSTOP; its FRR still announces d2), d2 deleted
 *   with `?force=true` is gone at once, and dpu2 is marked: its ports say it has not
 *   confirmed d2 isolated; the agent thawed isolates d2 (the reflector loses its /32, the
 *   VRF goes), and the next host on dpu2 clears the mark.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Queue } from 'bullmq'
import { routerMacOf } from '../../agent/vrf.ts'
import { labPrefix, run } from '../../infra/lab/dpu.ts'
import { agentRunDir } from '../../infra/lab/dpu-agent.ts'
import { FABRIC_ROUTER_ASN } from '../../infra/lab/fabric-router.ts'
import { type Lab, type LabDpu, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { eventually, netnsExec, pings } from '../../infra/lab/probes.ts'
import { agentQueueName, buildFabricConfigurePayload } from '../../lib/agent-protocol/index.ts'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { processesMentioning } from '../helpers/processes.ts'
import { attachHost, hostReady, isGone } from './api.ts'
import { labTest } from './lab-test.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))
const network = { cidr: '10.30.0.0/24', gateway: '10.30.0.1' }

interface HostView {
  status?: {
    phase?: string
    attempt?: number
    hostAccessIPs?: { hostIP?: string }
    conditions?: { type: string; reason: string; message: string }[]
  }
}
interface ObservedVrf {
  group: string
  vrf: string
  ports: string[]
  announced: string[]
  relay?: { circuitId: string; running: boolean }
}
interface DpuView {
  state?: string
  ports?: { port: string; reason?: string }[]
  agent?: { observed?: { vrfs?: ObservedVrf[] } }
}
interface Events {
  items?: { reason: string; message: string }[]
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

/** dnsmasq's hex of option 82's circuit id sub-option: `01:<len>:<bytes>`. */
function circuitIdHex(circuitId: string): string {
  const hex = [...Buffer.from(circuitId)].map((b) => b.toString(16).padStart(2, '0'))
  return ['01', circuitId.length.toString(16).padStart(2, '0'), ...hex].join(':')
}

await labTest(
  'Fabric groups: DHCP with circuit id vlan<N>, drift repaired, agent restart, forced detach',
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-fabric-ops-'))
    let lab: Lab | undefined
    const restarted: Daemon[] = []
    const frozen: number[] = []
    const dhclients: (() => Promise<unknown>)[] = []
    t.teardown(async () => {
      for (const pid of frozen) {
        try {
          process.kill(pid, 'SIGCONT')
        } catch {}
      }
      for (const stop of dhclients) await stop().catch(() => {})
      for (const d of restarted) await d.stop().catch(() => {})
      await lab?.stop()
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
    })
    // An admin network makes the DPUs' port list say what a forced detach left unconfirmed.
    lab = await startLab({
      dataDir,
      prefix: labPrefix(),
      dpus: 2,
      adminNetwork: { cidr: '10.99.99.0/24', gateway: '10.99.99.1' },
    })
    const l = lab
    const [dpu1, dpu2] = l.dpus
    if (!dpu1 || !dpu2) throw new Error('the lab has two DPUs')

    const put = await l.api('PUT', '/v1/resource-groups/fab-d', {
      tenantId: 'tenant-d',
      network,
      dhcpServer: l.dhcpServerIp,
      networkImplementationType: 'Fabric',
    })
    t.equal(put.status, 202, 'fab-d: a Fabric group with a DHCP server')
    let group: {
      status?: { phase?: string; dhcpCircuitId?: string; fabric?: { vni: number; vlan: number } }
    } = {}
    t.ok(
      await eventually(async () => {
        group = (await l.api('GET', '/v1/resource-groups/fab-d')).body as typeof group
        return group.status?.phase === 'Ready'
      }),
      'fab-d is Ready',
    )
    const vni = group.status?.fabric?.vni ?? 0
    const vlan = group.status?.fabric?.vlan ?? 0
    const circuitId = `vlan${vlan}`
    t.equal(group.status?.dhcpCircuitId, circuitId, `its relays' circuit id is ${circuitId}`)
    const rt = `${FABRIC_ROUTER_ASN}:${vni}`

    const hostView = async (name: string) =>
      (await l.api('GET', `/v1/managed-resources/${name}`)).body as HostView
    const dpuView = async (id: string) => (await l.api('GET', `/v1/dpus/${id}`)).body as DpuView
    const vrfOf = async (id: string) =>
      (await dpuView(id)).agent?.observed?.vrfs?.find((v) => v.group === 'fab-d')
    const routes = () => l.router.evpnRoutes()
    /** `name` configured again past `attempt` and Ready, its /32 on the reflector from `dpu`. */
    const announcedAgain = (name: string, ip: string, dpu: LabDpu, attempt: number, ms: number) =>
      eventually(async () => {
        const h = await hostView(name)
        const back = (await routes()).get(`${rt}|${ip}/32`)?.join() === dpu.encapIp
        return h.status?.phase === 'Ready' && (h.status.attempt ?? 1) > attempt && back
      }, ms)

    const add = async (tt: typeof t, name: string, dpu: number, i: number) => {
      const host = await l.addHost({ dpu, name, mac: `0a:00:00:00:0d:0${i}` })
      const answer = await attachHost(l, host, 'fab-d', undefined)
      tt.ok(answer.status < 300, `attach ${name} to fab-d on dpu${dpu}, its address from IPAM`)
      return host
    }
    const d1 = await add(t, 'd1', 1, 1)
    const d2 = await add(t, 'd2', 2, 2)
    for (const name of ['d1', 'd2']) {
      if (!t.ok(await hostReady(l, name, 90_000), `${name} is Ready`)) {
        t.comment(JSON.stringify(await hostView(name)))
      }
    }
    const ipOf = async (name: string) => (await hostView(name)).status?.hostAccessIPs?.hostIP ?? ''
    const ip1 = await ipOf('d1')
    const ip2 = await ipOf('d2')
    t.match(
      (await hostView('d1')).status?.conditions?.find((c) => c.type === 'AgentConfigured'),
      { reason: 'RoutesAnnounced', message: new RegExp(`circuit id ${circuitId}`) },
      "d1's status says its DPU relays DHCP with the group's circuit id",
    )

    await t.test('DHCP through the relay on the group interface, circuit id vlan<N>', async (t) => {
      await l.configureDhcp([
        {
          circuitId,
          ...network,
          leases: [
            { mac: d1.mac, ip: ip1 },
            { mac: d2.mac, ip: ip2 },
          ],
        },
      ])
      const lease = async (h: LabHost) => {
        const pid = join(dataDir, `${h.name}.pid`)
        dhclients.push(() => h.exec('dhclient', '-x', '-pf', pid))
        return h
          .exec(
            'timeout',
            '25',
            'dhclient',
            '-1',
            '-v',
            '-pf',
            pid,
            '-lf',
            join(dataDir, `${h.name}.leases`),
            'eth0',
          )
          .then(() => true)
          .catch((error: unknown) => {
            t.comment(String(error))
            return false
          })
      }
      for (const [h, ip] of [
        [d1, ip1],
        [d2, ip2],
      ] as const) {
        t.ok(await lease(h), `${h.name}: dhclient got a lease`)
        t.match(
          await h.exec('ip', '-4', 'addr', 'show', 'eth0'),
          new RegExp(`inet ${ip.replaceAll('.', '\\.')}/24`),
          `${h.name}: the address IPAM chose (${ip})`,
        )
      }
      const log = await readFile(l.dhcpLog, 'utf8')
      t.match(log, circuitIdHex(circuitId), `the server saw circuit id ${circuitId} (option 82)`)
      t.match(log, new RegExp(`DHCPACK\\(\\S+\\) ${ip1.replaceAll('.', '\\.')} ${d1.mac}`))
      t.match(log, new RegExp(`DHCPACK\\(\\S+\\) ${ip2.replaceAll('.', '\\.')} ${d2.mac}`))
      t.ok(
        await eventually(() => pings(d1.netns, ip2), 20_000),
        'd1 reaches d2 over the fabric on the leased addresses',
      )
      t.match(
        await vrfOf('dpu1'),
        { relay: { circuitId, running: true } },
        "dpu1's heartbeat reports the group's relay",
      )
    })

    await t.test("a host's /32 deleted behind the agent's back is announced again", async (t) => {
      const before = (await hostView('d1')).status?.attempt ?? 1
      await netnsExec(`${dpu1.sim.netns}-v${vni}`, 'ip', 'route', 'del', `${ip1}/32`)
      const repaired = await announcedAgain('d1', ip1, dpu1, before, 60_000)
      t.ok(repaired, 'd1 configured again (a new attempt), its /32 on the reflector again')
      const events = (await l.api('GET', '/v1/managed-resources/d1/events')).body as Events
      t.ok(
        events.items?.some((e) => e.reason === 'RouteLost' && e.message.includes(`${ip1}/32`)),
        `the repair is in d1's events: ${events.items?.map((e) => e.reason).join(', ')}`,
      )
      t.ok(await eventually(() => pings(d1.netns, ip2), 20_000), 'd1 reaches d2 again')
    })

    await t.test("a VRF removed behind the agent's back is built again", async (t) => {
      const before = (await hostView('d2')).status?.attempt ?? 1
      // As its removal would: the port back to the underlay, then the VRF's namespace.
      const ns = `${dpu2.sim.netns}-v${vni}`
      const view = join(dpu2.sim.dataDir, 'vrfs', `hzv${vni}`)
      // The L3VNI bridge's MAC is the RMAC dpu1 sends d2's traffic to.
      const rmac = async () =>
        (
          JSON.parse(await netnsExec(ns, 'ip', '-j', 'link', 'show', `hzb${vni}`)) as {
            address: string
          }[]
        )[0]?.address
      t.equal(await rmac(), routerMacOf(dpu2.encapIp), "dpu2's router MAC is its VTEP's")
      await netnsExec(ns, 'ip', 'link', 'set', d2.hostPort, 'nomaster')
      await netnsExec(ns, 'ip', 'link', 'set', d2.hostPort, 'netns', dpu2.sim.netns)
      await run('sh', ['-c', `umount -l ${view}; rm -f ${view}; ip netns del ${ns}`])
      t.ok(
        await eventually(async () => !(await routes()).has(`${rt}|${ip2}/32`), 20_000),
        "the reflector lost d2's /32 with the VRF",
      )
      const repaired = await announcedAgain('d2', ip2, dpu2, before, 90_000)
      if (!t.ok(repaired, 'd2 configured again, its VRF built again, its /32 announced again')) {
        t.comment(JSON.stringify(await hostView('d2')))
      }
      t.equal(await rmac(), routerMacOf(dpu2.encapIp), 'the VRF built again keeps it')
      t.ok(await eventually(() => pings(d2.netns, ip1), 20_000), 'd2 reaches d1 again')
    })

    /** DPU `id`'s job queue, closed when `tt` ends. */
    const dpuQueue = (tt: typeof t, id: string) => {
      const redis = createRedis(l.redis, { maxRetriesPerRequest: null })
      const queue = new Queue(agentQueueName(id), { connection: redis })
      tt.teardown(async () => {
        await queue.close()
        redis.disconnect()
      })
      return queue
    }

    await t.test('a VRF of a group the controller does not know is removed', async (t) => {
      const x1 = await l.addHost({ dpu: 1, name: 'x1', mac: '0a:00:00:00:0d:09' })
      const queue = dpuQueue(t, 'dpu1')
      const ghostVni = 19_999
      const payload = buildFabricConfigurePayload({
        dpuId: 'dpu1',
        specVersion: 1,
        group: {
          name: 'ghost',
          vni: ghostVni,
          vlan: 4000,
          asn: FABRIC_ROUTER_ASN,
          routeTarget: `${FABRIC_ROUTER_ASN}:${ghostVni}`,
          gateways: [{ address: '10.98.0.1', prefixLength: 24 }],
        },
        host: { name: 'x1', mac: x1.mac, hostPort: x1.hostPort, addresses: ['10.98.0.5'] },
      })
      await queue.add('configure', payload, { jobId: 'ghost-configure-1' })
      const built = await eventually(async () => {
        const job = await queue.getJob('ghost-configure-1')
        return (await job?.getState()) === 'completed'
      }, 60_000)
      t.ok(built, "dpu1's agent built VRF hzv19999 for it")
      const removed = await eventually(async () => {
        const vrfs = (await dpuView('dpu1')).agent?.observed?.vrfs ?? []
        return !vrfs.some((v) => v.vrf === `hzv${ghostVni}`)
      }, 60_000)
      t.ok(removed, "dpu1's heartbeat no longer shows it")
      t.notOk(
        (await routes()).has(`${FABRIC_ROUTER_ASN}:${ghostVni}|10.98.0.5/32`),
        'the reflector holds none of its routes',
      )
      const events = (await l.api('GET', '/v1/dpus/dpu1/events')).body as Events
      t.ok(
        events.items?.some(
          (e) => e.reason === 'StrayVrfIsolated' && e.message.includes(`hzv${ghostVni}`),
        ),
        "the repair is in dpu1's events",
      )
      t.ok(await pings(d1.netns, ip2), 'fab-d is untouched')
    })

    await t.test("a host's detach ends its configure waiting for a silent zebra", async (t) => {
      // dpu1's zebra frozen: a new host's route in the VRF never reaches bgpd, and its
      // configure waits for an announcement that does not come.
      const pidFile = join(agentRunDir(dpu1.sim), 'evpn', 'zebra.pid')
      const zebra = Number((await readFile(pidFile, 'utf8')).trim())
      process.kill(zebra, 'SIGSTOP')
      frozen.push(zebra)
      const queue = dpuQueue(t, 'dpu1')
      await add(t, 'd4', 1, 4)
      const configuring = async () =>
        (await queue.getActive()).find(
          (j) =>
            j.name === 'configure' && (j.data as { host?: { name?: string } }).host?.name === 'd4',
        )
      let waiting: Awaited<ReturnType<typeof configuring>>
      const running = await eventually(async () => {
        waiting = await configuring()
        return waiting !== undefined
      }, 30_000)
      t.ok(running, "dpu1's agent runs d4's configure")
      await sleep(2000)
      t.not((await hostView('d4')).status?.phase, 'Ready', 'd4 is not Ready: nothing announces it')

      const deleted = Date.now()
      t.equal((await l.api('DELETE', '/v1/managed-resources/d4')).status, 202, 'DELETE d4')
      // Its isolate, queued behind the configure, ends the configure's wait: d4 is gone
      // well within the agent's install timeout (30 s), which the DPU's queue waited out before.
      t.ok(await isGone(l, '/v1/managed-resources/d4', 15_000), 'd4 is gone')
      const took = Date.now() - deleted
      t.ok(took < 15_000, `within seconds (${took} ms)`)
      const ended = await queue.getJob(waiting?.id ?? '')
      t.match(
        ended?.failedReason,
        /AGENT_JOB_SUPERSEDED: .*fabric:fab-d\/d4.*stopped waiting for its host's routes to be announced/,
        'the configure stopped, saying why',
      )
      t.equal(ended?.attemptsMade, 1, 'and was not retried')

      process.kill(zebra, 'SIGCONT')
      frozen.splice(frozen.indexOf(zebra), 1)
      t.ok(await eventually(() => pings(d1.netns, ip2), 20_000), 'd1 still reaches d2')
    })

    await t.test('a restarted agent announces its hosts again by itself', async (t) => {
      const before = (await hostView('d1')).status?.attempt ?? 1
      const agent = await agentProcess(dpu1)
      process.kill(agent.pid, 'SIGKILL')
      t.ok(
        await eventually(async () => !(await routes()).has(`${rt}|${ip1}/32`), 20_000),
        "its FRR died with it: the reflector lost d1's /32",
      )
      const [command, ...args] = agent.argv
      restarted.push(
        await startDaemon({
          name: 'agent(dpu1) again',
          command: command ?? process.execPath,
          args,
          cwd: repo,
          env: { REDIS_URL: agent.redisUrl },
          netns: dpu1.sim.netns,
          logFile: join(dpu1.sim.dataDir, 'agent-restarted.log'),
          ready: async () => (await dpuView('dpu1')).state === 'Online',
          readyTimeoutMs: 60_000,
        }),
      )
      t.ok(
        await eventually(
          async () => (await routes()).get(`${rt}|${ip1}/32`)?.join() === dpu1.encapIp,
          30_000,
        ),
        "d1's /32 is on the reflector again",
      )
      t.ok(await eventually(() => pings(d1.netns, ip2), 20_000), 'd1 reaches d2 again')
      t.equal((await hostView('d1')).status?.attempt ?? 1, before, 'by the agent itself: no repair')
      t.ok(
        await eventually(async () => (await vrfOf('dpu1'))?.relay?.running === true),
        'its relay runs again',
      )
    })

    await t.test("dpu2's bgpd killed: FRR starts again with d2's VRF configured", async (t) => {
      // The agent keeps what it configured in FRR; a bgpd that died took it along.
      const before = (await hostView('d2')).status?.attempt ?? 1
      const pidFile = join(agentRunDir(dpu2.sim), 'evpn', 'bgpd.pid')
      const bgpd = Number((await readFile(pidFile, 'utf8')).trim())
      t.ok(bgpd > 0, `dpu2's bgpd runs (pid ${bgpd})`)
      process.kill(bgpd, 'SIGKILL')
      t.ok(
        await eventually(async () => !(await routes()).has(`${rt}|${ip2}/32`), 20_000),
        "the reflector lost d2's /32 with dpu2's bgpd",
      )
      const repaired = await announcedAgain('d2', ip2, dpu2, before, 90_000)
      if (!t.ok(repaired, 'd2 configured again: a new bgpd holds its VRF and announces its /32')) {
        t.comment(JSON.stringify(await hostView('d2')))
      }
      t.not(Number((await readFile(pidFile, 'utf8')).trim()), bgpd, 'another bgpd')
      t.ok(await eventually(() => pings(d2.netns, ip1), 20_000), 'd2 reaches d1 again')
    })

    await t.test('a forced detach marks the DPU, which isolates the host', async (t) => {
      const agent = await agentProcess(dpu2)
      process.kill(agent.pid, 'SIGSTOP')
      frozen.push(agent.pid)
      t.ok(
        await eventually(async () => (await dpuView('dpu2')).state === 'Lost', 20_000),
        "dpu2's agent is silent",
      )
      const deleted = await l.api('DELETE', '/v1/managed-resources/d2?force=true')
      t.equal(deleted.status, 202, 'DELETE d2 ?force=true')
      t.ok(await isGone(l, '/v1/managed-resources/d2', 30_000), 'd2 is gone without its DPU')
      t.ok((await routes()).has(`${rt}|${ip2}/32`), "dpu2's FRR still announces d2: not isolated")
      const port = (await dpuView('dpu2')).ports?.find((p) => p.port === d2.hostPort)
      t.match(port?.reason, /has not confirmed d2 isolated/, `dpu2 is marked: ${port?.reason}`)

      process.kill(agent.pid, 'SIGCONT')
      frozen.splice(frozen.indexOf(agent.pid), 1)
      t.ok(
        await eventually(async () => !(await routes()).has(`${rt}|${ip2}/32`), 30_000),
        "back, dpu2's agent isolated d2: its /32 is withdrawn",
      )
      t.ok(
        await eventually(async () => (await vrfOf('dpu2')) === undefined, 30_000),
        "and fab-d's VRF left dpu2 (d2 was its last host there)",
      )
      let reason: string | undefined
      const cleared = await eventually(async () => {
        reason = (await dpuView('dpu2')).ports?.find((p) => p.port === d2.hostPort)?.reason
        return reason !== undefined && !/has not confirmed/.test(reason)
      }, 30_000)
      t.ok(cleared, `its isolate acked, the mark is cleared: ${reason}`)
      await add(t, 'd3', 2, 3)
      t.ok(await hostReady(l, 'd3', 90_000), 'dpu2 serves a new host of fab-d: d3 is Ready')
    })
  },
)

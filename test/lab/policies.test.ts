/**
 * A group's security policies on the simulated data centre, proven with real packets: real
 * agents, ovn-controller and the userspace datapath's conntrack enforce the port groups
 * and ACLs Hydrazine writes.
 *
 * group-a: a1 (dpu 1), a2 (dpu 2), a3 (dpu 3); a2 listens on TCP 8080 and 8081. The rules
 * deny a1 → a2 ping and a1 → a2 TCP 8080; everything else keeps flowing, and removing the
 * rules restores a1 → a2.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, startLab } from '../../infra/lab/lab.ts'
import { eventually, netnsExec, pings } from '../../infra/lab/probes.ts'
import { attachHost, hostReady, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

/**
 * A TCP server in `netns` on `port` that greets each connection with `hello <port>`. A
 * client that gave up (reset) must not take the server down with it.
 */
function listen(netns: string, port: number): ChildProcess {
  const server = `require('net').createServer((s) => { s.on('error', () => {}); s.end('hello ${port}\\n') }).listen(${port})`
  return spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', server], { stdio: 'ignore' })
}

/** True when a TCP connection from `netns` to `ip:port` is answered within 3 s. */
async function connects(netns: string, ip: string, port: number): Promise<boolean> {
  const client = [
    `const s = require('net').connect({ host: '${ip}', port: ${port}, timeout: 3000 })`,
    "s.on('data', (d) => { process.stdout.write(d); process.exit(0) })",
    "s.on('timeout', () => process.exit(2))",
    "s.on('error', () => process.exit(3))",
  ].join('\n')
  try {
    return (await netnsExec(netns, process.execPath, '-e', client)).includes(`hello ${port}`)
  } catch {
    return false
  }
}

interface GroupView {
  specVersion?: number
  status?: {
    phase?: string
    observedVersion?: number
    conditions?: { type: string; status: string; reason: string }[]
  }
}

await labTest('security policies on a simulated data centre', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-policies-'))
  let lab: Lab | undefined
  const servers: ChildProcess[] = []
  t.teardown(async () => {
    for (const s of servers) s.kill('SIGKILL')
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix() })
  const l = lab
  const network = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
  const putGroup = async (policies?: unknown[]) => {
    const answer = await l.api('PUT', '/v1/resource-groups/group-a', {
      tenantId: 'tenant-a',
      network,
      ...(policies ? { policies } : {}),
    })
    const refused = answer.status < 300 ? '' : ` ${JSON.stringify(answer.body)}`
    t.ok(answer.status < 300, `PUT group-a → ${answer.status}${refused}`)
  }
  /** True once the group's current spec is applied and PoliciesApplied says `reason`. */
  const applied = (reason: string | undefined) =>
    eventually(async () => {
      const g = (await l.api('GET', '/v1/resource-groups/group-a')).body as GroupView
      const c = g.status?.conditions?.find((x) => x.type === 'PoliciesApplied')
      return (
        g.status?.phase === 'Ready' &&
        g.status.observedVersion === g.specVersion &&
        c?.reason === reason
      )
    }, 60_000)

  await putGroup()
  t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group-a is Ready')
  const hosts = await Promise.all(
    [1, 2, 3].map((n) =>
      l.addHost({
        dpu: n,
        name: `a${n}`,
        mac: `0a:00:00:00:0a:0${n}`,
        ipCidr: `10.10.10.1${n}/24`,
      }),
    ),
  )
  const [a1, a2, a3] = hosts
  if (!a1 || !a2 || !a3) throw new Error('three hosts expected')
  for (const h of hosts) {
    await h.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
    const ip = `10.10.10.1${h.name.slice(1)}`
    t.ok((await attachHost(l, h, 'group-a', ip)).status < 300, `attach ${h.name}`)
  }
  for (const h of hosts) t.ok(await hostReady(l, h.name), `${h.name} is Ready`)
  servers.push(listen(a2.netns, 8080), listen(a2.netns, 8081))
  const a2Ip = '10.10.10.12'

  await t.test('without rules, everything flows', async (t) => {
    t.ok(await eventually(() => pings(a1.netns, a2Ip), 20_000), 'a1 → a2 ping')
    t.ok(await eventually(() => connects(a1.netns, a2Ip, 8080), 10_000), 'a1 → a2 TCP 8080')
    t.ok(await eventually(() => connects(a3.netns, a2Ip, 8080), 10_000), 'a3 → a2 TCP 8080')
  })

  await t.test('deny rules stop a1 → a2 ping and TCP 8080, and nothing else', async (t) => {
    await putGroup([
      {
        name: 'no-ping-from-a1',
        direction: 'ingress',
        action: 'deny',
        hosts: ['a2'],
        peer: { hosts: ['a1'] },
        protocol: 'icmp',
      },
      {
        name: 'no-web-from-a1',
        direction: 'ingress',
        action: 'deny',
        hosts: ['a2'],
        peer: { hosts: ['a1'] },
        protocol: 'tcp',
        ports: '8080',
      },
    ])
    t.ok(await applied('RulesApplied'), 'PoliciesApplied: the rules are applied')
    t.ok(await eventually(async () => !(await pings(a1.netns, a2Ip, 1)), 20_000), 'a1 ↛ a2 ping')
    t.notOk(await pings(a1.netns, a2Ip, 2), 'and stays so')
    t.notOk(await connects(a1.netns, a2Ip, 8080), 'a1 ↛ a2 TCP 8080')
    t.ok(await connects(a1.netns, a2Ip, 8081), 'a1 → a2 TCP 8081 still flows')
    t.ok(await pings(a3.netns, a2Ip), 'a3 → a2 ping still flows')
    t.ok(await connects(a3.netns, a2Ip, 8080), 'a3 → a2 TCP 8080 still flows')
    t.ok(await pings(a2.netns, '10.10.10.11'), 'a2 → a1 ping still flows (and its replies)')
    t.ok(await pings(a2.netns, network.gateway), 'a2 → gateway still flows')
    t.ok(await pings(a1.netns, network.gateway), 'a1 → gateway still flows')
  })

  await t.test('removing the rules restores a1 → a2', async (t) => {
    await putGroup()
    t.ok(await applied(undefined), 'no rules: no PoliciesApplied condition')
    t.ok(await eventually(() => pings(a1.netns, a2Ip, 1), 20_000), 'a1 → a2 ping')
    t.ok(await eventually(() => connects(a1.netns, a2Ip, 8080), 10_000), 'a1 → a2 TCP 8080')
  })
})

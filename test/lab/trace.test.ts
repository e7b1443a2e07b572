/**
 * `GET /v1/trace` on the simulated data centre: what ovn-trace says, checked against real
 * packets. Real agents and ovn-controller bind the ports and learn the fabric gateway's
 * MAC, so a packet to the outside is traced through its SNAT.
 *
 * group-a: a1 (FabricAccess, dpu 1) and a2 (PublicAccess, dpu 2); group-b (same CIDR):
 * b1 (dpu 3) at a1's address. Nothing at a2's address in group-b.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, startLab } from '../../infra/lab/lab.ts'
import { capture, eventually, icmpInEchos, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

interface Answer {
  verdict?: string
  delivered?: { host?: string; group?: string; port?: string }
  leaves?: { dpu?: string; source?: string; arp?: unknown }
  unresolved?: { datapath?: string; target?: string }
  notes?: string[]
  hops?: string[]
  from?: { dpu?: string }
}

const hzBin = fileURLToPath(new URL('../../infra/cli/bin.mjs', import.meta.url))

/** Runs `hz` (the real binary) against the lab's Hydrazine. */
function hz(l: Lab, args: string[]) {
  return new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(
      process.execPath,
      [hzBin, ...args],
      { env: { ...process.env, HYDRAZINE_URL: l.url, HYDRAZINE_TOKEN: l.token } },
      (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    )
  })
}

await labTest('trace on a simulated data centre', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-trace-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix() })
  const l = lab
  const [dpu1, dpu2] = l.dpus
  if (!dpu1 || !dpu2) throw new Error('three DPUs expected')
  const trace = async (query: string) => {
    const answer = await l.api('GET', `/v1/trace?${query}`)
    t.equal(answer.status, 200, `trace ${query}`)
    return answer.body as Answer
  }

  const network = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
  const publicIp = '203.0.113.20'
  t.equal((await l.api('PUT', `/v1/public-ips/${publicIp}`, {})).status, 200)
  for (const [group, tenantId] of [
    ['group-a', 'tenant-a'],
    ['group-b', 'tenant-b'],
  ] as const) {
    await l.api('PUT', `/v1/resource-groups/${group}`, { tenantId, network })
    t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
  }
  const host = (dpu: number, name: string, mac: string, ip: string) =>
    l.addHost({ dpu, name, mac, ipCidr: `${ip}/24` })
  const a1 = await host(1, 'a1', '0a:00:00:00:0a:01', '10.10.10.11')
  const a2 = await host(2, 'a2', '0a:00:00:00:0a:02', '10.10.10.12')
  const b1 = await host(3, 'b1', '0a:00:00:00:0b:01', '10.10.10.11')
  for (const h of [a1, a2, b1]) {
    await h.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
  }
  for (const [h, group, access] of [
    [a1, 'group-a', 'FabricAccess'],
    [a2, 'group-a', 'PublicAccess'],
    [b1, 'group-b', 'None'],
  ] as const) {
    const ip = h === a2 ? '10.10.10.12' : '10.10.10.11'
    t.ok((await attachHost(l, h, group, ip, access)).status < 300, `attach ${h.name}`)
  }
  for (const h of ['a1', 'a2', 'b1']) t.ok(await hostReady(l, h), `${h} is Ready`)

  await t.test('trace a1 a2: delivered, and a ping arrives', async (t) => {
    const answer = await trace('from=a1&to=a2')
    t.equal(answer.verdict, 'delivered')
    t.match(answer.delivered, { host: 'a2', group: 'group-a' })
    // The same through the command line, as an operator asks it.
    const cli = await hz(l, ['trace', 'a1', 'a2'])
    t.equal(cli.code, 0, cli.err)
    t.match(cli.out, /^a1 \(10\.10\.10\.11\) reaches host a2 of group group-a/)
    t.match(cli.out, /\n {2}1\. /, 'with its hops')
    t.ok(await eventually(() => pings(a1.netns, '10.10.10.12'), 20_000), 'a1 → a2 answered')
  })

  await t.test(
    "trace b1 <a2's address>: stays in group-b; nothing in group-a sees it",
    async (t) => {
      const answer = await trace('from=b1&to=10.10.10.12')
      t.equal(answer.verdict, 'unresolved', 'nothing in group-b has the address')
      const cli = await hz(l, ['trace', 'b1', '10.10.10.12'])
      t.match(cli.out, /is never sent/)
      t.match(cli.out, /note: .*this trace never enters/)
      t.equal(answer.unresolved?.datapath, topologyNames.switch('group-b'))
      t.match(answer.notes, [/also host a2's address in group group-a; this trace never enters/])
      t.notMatch((answer.hops ?? []).join('\n'), /group-a/)
      const before = await icmpInEchos(a2.netns)
      t.notOk(await pings(b1.netns, '10.10.10.12', 2), 'and b1 → 10.10.10.12 is not answered')
      t.equal(await icmpInEchos(a2.netns), before, 'a2 saw none of it')
    },
  )

  await t.test('trace a1 <outside>: leaves through dpu 1 as its NAT IP, as captured', async (t) => {
    const outside = l.router.internetIp
    // The first packet makes the gateway router learn the fabric gateway's MAC.
    const seen = await capture(l.router.netns, `icmp and dst host ${outside}`, () =>
      eventually(() => pings(a1.netns, outside, 1), 20_000),
    )
    const answer = await trace(`from=a1&to=${outside}`)
    t.equal(answer.verdict, 'leaves')
    t.match(answer.leaves, { dpu: dpu1.id, source: dpu1.natIp })
    t.notOk(answer.leaves?.arp, 'its next hop is known: the SNAT is in the trace itself')
    t.match(seen, `${dpu1.natIp} > ${outside}`, 'the fabric saw the source the trace named')
  })

  await t.test('trace fabric <public IP>: reaches the PublicAccess host', async (t) => {
    const answer = await trace(`from=fabric&to=${publicIp}`)
    t.equal(answer.verdict, 'delivered')
    t.match(answer.delivered, { host: 'a2', group: 'group-a' })
    t.match(answer.from, { fabric: true, dpu: dpu2.id }, "in by a2's DPU")
    t.ok(
      (answer.hops ?? []).some((h) => h.includes('destination becomes 10.10.10.12 (DNAT')),
      'through the DNAT',
    )
    const cli = await hz(l, ['trace', 'fabric', publicIp])
    t.equal(cli.code, 0, cli.err)
    t.match(cli.out, /reaches host a2 of group group-a/, 'hz trace fabric <public IP>')
    const before = await icmpInEchos(a2.netns)
    t.ok(await eventually(() => pings(l.router.netns, publicIp, 1), 30_000), 'router → public IP')
    t.ok((await icmpInEchos(a2.netns)) > before, 'answered by a2')
  })
})

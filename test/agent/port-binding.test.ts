/**
 * `waitInstalled` against a simulated DPU's OVS, with `ovn-installed` set by hand where
 * ovn-controller would set it: the wait ends when, and only when, the agent's own port
 * bound to the logical port is marked, and says false when the mark never comes.
 *
 * `southboundReleased` against a real Southbound: a logical port counts as released from
 * this chassis only when the SB said so. A Southbound the agent cannot ask — down, or
 * `ssl:` without the DPU's TLS material — never counts as released.
 */
import { join } from 'node:path'
import t from 'tap'
import { Key, LocalOvs } from '../../agent/ovs.ts'
import { southboundReleased, waitInstalled } from '../../agent/port-binding.ts'
import { createDpu, createFabric, labPrefix, run } from '../../infra/lab/dpu.ts'
import { freePort } from '../../lib/process/ports.ts'
import { tempDir, withStack } from '../helpers/stack.ts'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

t.test('installed means ovn-installed on our port, heard when it is set', async (t) => {
  const dataDir = await tempDir(t, 'hz-installed-')
  const fabric = await createFabric({ prefix: labPrefix() })
  t.teardown(() => fabric.destroy())
  const dpu = await createDpu({ fabric, name: 'dpu1', dataDir })
  t.teardown(() => dpu.destroy())
  const ovs = await LocalOvs.connect(dpu.ovsDb)
  t.teardown(() => ovs.close())
  const host = await dpu.addHost({ name: 'h1', mac: '0a:00:00:00:00:01' })
  const other = await dpu.addHost({ name: 'h2', mac: '0a:00:00:00:00:02' })
  await ovs.ensureBridges([{ name: 'br-int', datapathType: 'netdev', failMode: 'secure' }])
  await ovs.ensurePort({
    bridge: 'br-int',
    name: host.hostPort,
    type: '',
    externalIds: { [Key.role]: 'host', [Key.ifaceId]: 'g-h1' },
    owner: [Key.ifaceId],
  })
  // A port of br-int the agent did not make, bound to the same logical port.
  await dpu.vsctl(
    'add-port',
    'br-int',
    other.hostPort,
    '--',
    'set',
    'Interface',
    other.hostPort,
    'external_ids:iface-id=g-h1',
  )
  const mark = (port: string) =>
    dpu.vsctl('set', 'Interface', port, 'external_ids:ovn-installed=true')
  const monitors = async () =>
    (await run('ovs-appctl', ['-t', join(dpu.dataDir, 'ovsdb-server.ctl'), 'memory/show'])).match(
      /monitors:(\d+)/,
    )?.[1] ?? '0'
  const idle = await monitors()

  t.equal(await waitInstalled(ovs, host.hostPort, 'g-h1', 500), false, 'never marked: false')

  let settled: boolean | undefined
  const waiting = waitInstalled(ovs, host.hostPort, 'g-h1', 20_000).then((installed) => {
    settled = installed
    return installed
  })
  await sleep(500)
  t.equal(settled, undefined, 'not before ovn-installed')
  await mark(other.hostPort)
  await sleep(500)
  t.equal(settled, undefined, "not for a port that is not the agent's")
  await mark(host.hostPort)
  t.equal(await waiting, true, 'heard once ovn-installed is set (before its time limit)')

  t.equal(await waitInstalled(ovs, host.hostPort, 'g-h1', 500), true, 'already marked: true')
  t.equal(
    await waitInstalled(ovs, host.hostPort, 'g-h9', 500),
    false,
    'marked, but bound to another logical port: false',
  )
  t.equal(await monitors(), idle, 'every wait cancelled its monitor')
})

t.test('released means the Southbound said so', async (t) => {
  const stack = await withStack(t, { redis: false, ovn: true })
  const ovn = stack.ovn
  if (!ovn) throw new Error('stack without OVN')
  const nbctl = (...a: string[]) => run('ovn-nbctl', [`--db=${ovn.nb.unix}`, '--timeout=10', ...a])
  const sbctl = (...a: string[]) => run('ovn-sbctl', [`--db=${ovn.sb.unix}`, '--timeout=10', ...a])
  await nbctl('ls-add', 'g', '--', 'lsp-add', 'g', 'g-h1', '--', 'lsp-add', 'g', 'g-h2')
  await nbctl('--wait=sb', 'sync')
  await sbctl('chassis-add', 'dpu-1', 'geneve', '192.0.2.1')
  await sbctl('chassis-add', 'dpu-2', 'geneve', '192.0.2.2')
  await sbctl('lsp-bind', 'g-h1', 'dpu-1')
  await sbctl('lsp-bind', 'g-h2', 'dpu-2')

  const logs: string[] = []
  const released = (remote: string | null, logicalPort: string) =>
    southboundReleased({
      remote,
      logicalPort,
      systemId: 'dpu-1',
      log: (line) => logs.push(line),
    })
  const down = `tcp:127.0.0.1:${await freePort()}`
  const cases: [string, string | null, string, boolean][] = [
    ['bound to this chassis', ovn.sb.remote, 'g-h1', false],
    ['bound to another chassis', ovn.sb.remote, 'g-h2', true],
    ['no such logical port', ovn.sb.remote, 'g-h9', true],
    ['no Southbound to follow at all', null, 'g-h1', true],
    ['a Southbound that is down', down, 'g-h1', false],
    ['a Southbound that is down, for a port it may not even know', down, 'g-h9', false],
    ['ssl: without TLS material', 'ssl:127.0.0.1:6642', 'g-h9', false],
  ]
  for (const [what, remote, logicalPort, expected] of cases) {
    t.equal(await released(remote, logicalPort), expected, what)
  }
  t.match(logs.join('\n'), `cannot check southbound ${down}`)
  t.match(logs.join('\n'), 'cannot check southbound ssl:127.0.0.1:6642 (ssl:, and no --tls-*)')

  await sbctl('lsp-unbind', 'g-h1')
  t.equal(await released(ovn.sb.remote, 'g-h1'), true, 'unbound')
})

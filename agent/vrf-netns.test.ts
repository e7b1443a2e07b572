/**
 * The netns VRF backend (the lab's) against real network namespaces: what it builds for a
 * group and a host is what it reads back — the host port, the group, and the host's /32 and
 * /128 routes on the group interface, none of the gateway's own (local table) addresses.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { netnsVrfBackend, runPlan } from './vrf.ts'

const exec = promisify(execFile)
const ip = (...args: string[]) => exec('ip', args)

const usable = await ip('netns', 'list').then(
  () => process.getuid?.() === 0,
  () => false,
)

t.test(
  'the netns backend reads back the VRF, its host port and its host routes',
  {
    skip: usable ? false : 'needs root and ip netns',
  },
  async (t) => {
    const underlay = `hzt${process.pid}`
    const dir = await mkdtemp(join(tmpdir(), 'hz-vrfs-'))
    const backend = netnsVrfBackend({ underlay, dir })
    const vni = 7_000 + (process.pid % 1_000)
    const port = 'hzp0'
    t.teardown(async () => {
      await backend.removeVrf({ vni }).catch(() => {})
      await ip('netns', 'del', underlay).catch(() => {})
      await exec('sh', ['-c', `umount -l ${dir} 2>/dev/null; true`])
      await rm(dir, { recursive: true, force: true })
    })
    await ip('netns', 'add', underlay)
    await ip('-n', underlay, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'hzh0')
    await ip('-n', underlay, 'addr', 'add', '100.64.0.2/24', 'dev', 'lo')
    await ip('-n', underlay, 'link', 'set', 'lo', 'up')

    t.same(await backend.list(), [], 'nothing before the VRF')
    await backend.prepare()
    await backend.ensureVrf({ vni, vlan: 12, group: 'group-a', vtep: '100.64.0.2' })
    await backend.attach({
      vni,
      vlan: 12,
      port,
      gateways: [
        { address: '10.20.0.1', prefixLength: 24 },
        { address: 'fd00:20::1', prefixLength: 64 },
      ],
      addresses: ['10.20.0.5', 'fd00:20::5'],
    })

    const [state, ...rest] = await backend.list()
    t.equal(rest.length, 0, 'one VRF')
    t.match(state, { vrf: `hzv${vni}`, vni, vlan: 12, group: 'group-a', ports: [port] })
    t.same(
      [...(state?.hostRoutes ?? [])].sort(),
      ['10.20.0.5/32', 'fd00:20::5/128'],
      "the host's routes, of both families, and not the gateway's local addresses",
    )

    await backend.withdraw({ vni, addresses: ['fd00:20::5'], vlan: 12 })
    t.same((await backend.list())[0]?.hostRoutes, ['10.20.0.5/32'], 'a withdrawn route is gone')

    await backend.detach({ vni, port, addresses: ['10.20.0.5'], vlan: 12 })
    t.match((await backend.list())[0], { ports: [], hostRoutes: [] }, 'the host gone')
    await backend.removeVrf({ vni })
    t.same(await backend.list(), [], 'the VRF gone')
  },
)

t.test(
  "a plan's ip commands run as one batch, each failure held against its own command",
  { skip: usable ? false : 'needs root and ip netns' },
  async (t) => {
    const ns = `hzb${process.pid}`
    t.teardown(() => ip('netns', 'del', ns).catch(() => {}))
    await ip('netns', 'add', ns)
    const n = (...argv: string[]) => ['ip', '-n', ns, ...argv]
    // A newer kernel says an address a device holds is "already assigned".
    const exists = /File exists|already assigned/
    await runPlan([
      { argv: n('link', 'add', 'hzq0', 'type', 'bridge'), done: exists },
      // Done already: ip says so, and the batch goes on.
      { argv: n('link', 'add', 'hzq0', 'type', 'bridge'), done: exists },
      { argv: n('link', 'set', 'hzq0', 'up') },
      { argv: n('addr', 'add', '10.9.0.1/32', 'dev', 'hzq0'), done: exists },
      { argv: n('addr', 'add', '10.9.0.1/32', 'dev', 'hzq0'), done: exists },
    ])
    const { stdout } = await ip('-n', ns, '-4', '-j', 'addr', 'show', 'hzq0')
    const [link] = JSON.parse(stdout) as { flags: string[]; addr_info: { local: string }[] }[]
    t.ok(link?.flags.includes('UP'), 'the device is up')
    t.same(
      link?.addr_info.map((a) => a.local),
      ['10.9.0.1'],
      'its address, added once',
    )

    await t.rejects(
      runPlan([
        { argv: n('link', 'set', 'hzq0', 'mtu', '1400') },
        { argv: n('link', 'set', 'hzq9', 'up'), done: exists },
        { argv: n('link', 'set', 'hzq0', 'alias', 'after') },
      ]),
      { message: new RegExp(`ip -n ${ns} link set hzq9 up failed: Cannot find device "hzq9"`) },
      'a failure that is not "done" names its own command and what ip said',
    )
    const after = JSON.parse((await ip('-n', ns, '-j', 'link', 'show', 'hzq0')).stdout) as {
      mtu: number
    }[]
    t.equal(after[0]?.mtu, 1400, 'the command before it ran')
  },
)

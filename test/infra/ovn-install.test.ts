/**
 * Per-group centrals on Debian 13's OVN (`HYDRAZINE_OVN_INSTALL=debian-13`): the root
 * `mmdebstrap` makes (once per machine, under HYDRAZINE_TEST_CACHE, default
 * /var/cache/hydrazine-test; ~20 s the first time, then reused) runs ovn-northd 25.x on
 * this Debian 12 system through its own loader; a group's topology applies; and a host
 * attach and detach in a 1,000-host NB cost ovn-northd no full recompute.
 */
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { centralDir, startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { resolveOvnInstall } from '../../infra/local/debian-ovn.ts'
import {
  applyGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  NbTopologyCache,
  OvsdbClient,
} from '../../lib/ovn/index.ts'
import { type OvnInstall, type OvnTool, ovnVersionIn, SYSTEM_OVN } from '../../lib/ovn/install.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { isAlive } from '../../lib/process/pids.ts'
import { type Teardown, tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)
const cacheDir = join(
  process.env.HYDRAZINE_TEST_CACHE ?? '/var/cache/hydrazine-test',
  'ovn-installs',
)
const began = Date.now()
const install = await resolveOvnInstall({ kind: 'debian-13' }, { cacheDir })
t.comment(`Debian 13 OVN root ${install.label} ready in ${Date.now() - began} ms`)

/** Runs one program of the install. */
async function tool(name: OvnTool, ...args: string[]): Promise<string> {
  const { command, args: before } = install.command(name)
  return (await run(command, [...before, ...args], { maxBuffer: 64 * 1024 * 1024 })).stdout
}

async function centralsOn(t: Teardown, ovn: OvnInstall, dir?: string) {
  const dataDir = dir ?? (await tempDir(t))
  const pki = await openCertificateAuthority(join(dataDir, 'pki'))
  const centrals = await startPerGroupCentrals({ dataDir, pki, install: ovn })
  t.teardown(() => centrals.close())
  return { centrals, dataDir }
}

/** Full recomputes of ovn-northd's `northd` engine node so far (`inc-engine/show-stats`). */
async function northdRecomputes(dir: string): Promise<number> {
  const stats = await tool('ovn-appctl', '-t', join(dir, 'northd.ctl'), 'inc-engine/show-stats')
  const node = /^Node: northd\n(?:.*\n)*?.*- recompute:\s+(\d+)/m.exec(stats)
  if (!node?.[1]) throw new Error(`no northd node in inc-engine/show-stats:\n${stats}`)
  return Number(node[1])
}

const hex = (n: number) => n.toString(16).padStart(2, '0')
function member(h: number): GroupMember {
  return {
    hostName: `h${h}`,
    logicalPort: `hz-g0-h${h}`,
    mac: `0a:00:00:00:${hex(h >> 8)}:${hex(h & 255)}`,
    ip: `10.10.${Math.floor(h / 200) + 1}.${(h % 200) + 2}`,
    dpu: { id: `dpu-${h % 20}`, natIp: `172.18.1.${(h % 20) + 1}` },
    access: 'None',
  }
}
function spec(hosts: number): GroupTopologySpec {
  return {
    name: 'g0',
    cidr: '10.10.0.0/16',
    gateway: '10.10.0.1',
    dummyFabricIp: '172.18.0.254/24',
    physicalNetwork: 'physnet',
    members: Array.from({ length: hosts }, (_, h) => member(h)),
  }
}

t.test("a group's central runs ovn-northd 25.x from the root, stoppable by its pid", async (t) => {
  const { centrals, dataDir } = await centralsOn(t, install)
  await centrals.ensure('group-a')
  const dir = centralDir(dataDir, 'group-a')
  const version = await tool('ovn-appctl', '-t', join(dir, 'northd.ctl'), 'version')
  t.match(ovnVersionIn(version), /^25\.\d+/, `ovn-appctl version: ${version.split('\n')[0]}`)
  const pids = await Promise.all(
    ['nb', 'sb', 'northd'].map(async (d) => Number(await readFile(join(dir, `${d}.pid`), 'utf8'))),
  )
  for (const pid of pids) {
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')
    t.equal(cmdline[0], install.command('ovn-northd').command, `pid ${pid}: the root's loader`)
  }
  await centrals.close()
  t.same(
    pids.filter((pid) => isAlive(pid)),
    [],
    'closed: the processes the pid files name are gone',
  )
})

t.test(
  "a group's 23.03 databases are converted and kept when its central moves to 25.x",
  async (t) => {
    const { centrals: old, dataDir } = await centralsOn(t, SYSTEM_OVN)
    const before = await old.ensure('group-a')
    t.equal(before.northdVersion?.split('.')[0], '23', 'first on the system OVN')
    await tool('ovn-nbctl', `--db=${before.nb}`, '--timeout=5', 'ls-add', 'kept')
    await old.close()
    const { centrals } = await centralsOn(t, install, dataDir)
    const after = await centrals.ensure('group-a')
    t.match(after.northdVersion, /^25\./, 'then on 25.x')
    t.same(after.sb, before.sb, 'same SB port for the DPUs')
    const names = await tool(
      'ovn-nbctl',
      `--db=${after.nb}`,
      '--bare',
      '--columns=name',
      'list',
      'Logical_Switch',
    )
    t.equal(names.trim(), 'kept', 'its NB rows are still there')
  },
)

t.test('a 1,000-host group applies; attach and detach cost northd no recompute', async (t) => {
  const { centrals } = await centralsOn(t, install)
  const central = await centrals.ensure('g0')
  const dir = join(central.nb.replace(/^unix:/, ''), '..')
  const nb = await OvsdbClient.connect(central.nb, { echoIntervalMs: 0 })
  t.teardown(() => nb.close())
  const cache = await NbTopologyCache.start(nb)
  t.teardown(() => cache.close())
  /** Applies the group with `hosts` members and waits until northd has written SB. */
  const converge = async (hosts: number) => {
    await applyGroupTopology(nb, spec(hosts), { cache })
    await tool('ovn-nbctl', `--db=${central.nb}`, '--timeout=30', '--wait=sb', 'sync')
  }
  const bound = async (port: string) =>
    (
      await tool(
        'ovn-sbctl',
        `--db=${central.sbController}`,
        '--bare',
        '--columns=logical_port',
        'find',
        'Port_Binding',
        `logical_port=${port}`,
      )
    ).trim()

  await converge(1000)
  t.equal(await bound('hz-g0-h999'), 'hz-g0-h999', '1,000 hosts: their ports are in SB')
  const before = await northdRecomputes(dir)
  await converge(1001)
  t.equal(await bound('hz-g0-h1000'), 'hz-g0-h1000', 'attach: the new port is in SB')
  const afterAttach = await northdRecomputes(dir)
  await converge(1000)
  t.equal(await bound('hz-g0-h1000'), '', 'detach: its port is gone from SB')
  const afterDetach = await northdRecomputes(dir)
  // OVN 23.03 recomputes everything on a switch port's change (2 per attach here).
  t.equal(afterAttach - before, 0, 'attach: no full recompute of the northd node')
  t.equal(afterDetach - afterAttach, 0, 'detach: no full recompute of the northd node')
})

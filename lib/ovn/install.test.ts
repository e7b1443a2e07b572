import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import {
  compareOvnReleases,
  OVN_TOOLS,
  OvnInstallInvalid,
  ovnInstallAt,
  ovnVersionIn,
  SYSTEM_OVN,
} from './install.ts'

/** A root with the given files (executable unless a schema), removed when the test ends. */
async function rootWith(
  t: { teardown(fn: () => unknown): void },
  files: readonly string[],
): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'hz-ovn-root-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  for (const file of files) {
    await mkdir(join(root, file, '..'), { recursive: true })
    await writeFile(join(root, file), '')
    if (!file.endsWith('.ovsschema')) await chmod(join(root, file), 0o755)
  }
  return root
}

const debianTools = OVN_TOOLS.map((tool) =>
  tool === 'ovsdb-server' ? 'usr/sbin/ovsdb-server' : `usr/bin/${tool}`,
)
const schemas = ['usr/share/ovn/ovn-nb.ovsschema', 'usr/share/ovn/ovn-sb.ovsschema']

t.test('the system OVN: programs on PATH, schemas under /usr/share/ovn', async (t) => {
  t.same(SYSTEM_OVN.command('ovn-northd'), { command: 'ovn-northd', args: [] })
  t.equal(SYSTEM_OVN.schemas.nb, '/usr/share/ovn/ovn-nb.ovsschema')
})

t.test(
  'a root with its own loader runs each program through it',
  {
    skip: process.arch !== 'x64' && 'loader paths checked for x64 only',
  },
  async (t) => {
    const root = await rootWith(t, [
      ...debianTools,
      ...schemas,
      'usr/lib64/ld-linux-x86-64.so.2',
      'usr/lib/x86_64-linux-gnu/libc.so.6',
    ])
    const ovn = ovnInstallAt(root)
    t.same(ovn.command('ovsdb-server'), {
      command: join(root, 'usr/lib64/ld-linux-x86-64.so.2'),
      args: [
        '--library-path',
        join(root, 'usr/lib/x86_64-linux-gnu'),
        join(root, 'usr/sbin/ovsdb-server'),
      ],
    })
    t.equal(ovn.schemas.sb, join(root, 'usr/share/ovn/ovn-sb.ovsschema'))
    t.equal(ovn.label, root)
  },
)

t.test('a make-install prefix without a loader runs its programs directly', async (t) => {
  const root = await rootWith(t, [
    ...OVN_TOOLS.map((tool) => (tool === 'ovsdb-server' ? 'sbin/ovsdb-server' : `bin/${tool}`)),
    'share/ovn/ovn-nb.ovsschema',
    'share/ovn/ovn-sb.ovsschema',
  ])
  t.same(ovnInstallAt(root).command('ovn-northd'), {
    command: join(root, 'bin/ovn-northd'),
    args: [],
  })
})

t.test('a root that lacks something is refused, naming what', async (t) => {
  const noNorthd = await rootWith(t, [
    ...debianTools.filter((f) => !f.endsWith('ovn-northd')),
    ...schemas,
  ])
  const noSchema = await rootWith(t, debianTools)
  const cases: [string, string, RegExp][] = [
    ['relative', 'opt/ovn', /not an absolute path/],
    ['missing', '/nonexistent/ovn-root', /no such directory/],
    ['no ovn-northd', noNorthd, /no ovn-northd in usr\/bin/],
    ['no schema', noSchema, /no ovn-nb\.ovsschema in usr\/share\/ovn or share\/ovn/],
  ]
  for (const [name, root, message] of cases) {
    t.throws(() => ovnInstallAt(root), OvnInstallInvalid, name)
    t.throws(() => ovnInstallAt(root), { code: 'OVN_INSTALL_INVALID', message }, name)
  }
})

t.test('versions: read from --version output, compared by release', async (t) => {
  const outputs: [string, string | undefined][] = [
    ['ovn-northd 25.03.0\nOpen vSwitch Library 3.5.0\n', '25.03.0'],
    ['ovn-controller 23.03.1\nOpen vSwitch Library 3.1.0\nOpenFlow versions 0x6:0x6\n', '23.03.1'],
    ['ovsdb-server (Open vSwitch) 3.5.0\n', '3.5.0'],
    ['', undefined],
    ['no version here', undefined],
  ]
  for (const [output, version] of outputs) t.equal(ovnVersionIn(output), version, output)
  const releases: [string, string, number][] = [
    ['23.03.1', '25.03.0', -1],
    ['25.03.0', '23.03.1', 1],
    ['23.03.1', '23.03.0', 0],
    ['24.09.2', '24.03.4', 1],
    ['24.03', '24.09.0', -1],
  ]
  for (const [a, b, sign] of releases) {
    t.equal(Math.sign(compareOvnReleases(a, b)), sign, `${a} vs ${b}`)
  }
})

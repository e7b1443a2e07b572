/**
 * A group's DHCP relay on a DPU, asked for several times at once (as overlapping jobs or a
 * restart's resume can): exactly one `dhcrelay` runs, with the settings asked for last,
 * and a stop asked for meanwhile leaves none behind. Real `ip netns`, veths and isc
 * `dhcrelay` in a namespace of the test's own.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import t from 'tap'
import { DhcpRelays, type RelaySpec } from '../../agent/daemons.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)
const root = process.getuid?.() === 0

t.test('concurrent starts and stops of one relay', { skip: !root && 'needs root' }, async (t) => {
  const netns = `hzt-rl-${randomBytes(3).toString('hex')}`
  const port = `hzr${randomBytes(4).toString('hex')}`
  await run('ip', ['netns', 'add', netns])
  t.teardown(async () => {
    await run('ip', ['netns', 'del', `${netns}-${port}`]).catch(() => {})
    await run('ip', ['netns', 'del', netns]).catch(() => {})
  })
  const runDir = await tempDir(t)
  const relays = new DhcpRelays({ runDir, ovsRunDir: runDir, netns, log: () => {} })
  t.teardown(() => relays.stopAll())
  const spec: RelaySpec = {
    group: 'group-a',
    port,
    dhcpServer: '192.0.2.53',
    mac: '0a:00:00:00:00:01',
    address: '10.10.10.3/24',
    uplinkAddress: '172.18.0.200/24',
  }
  /** The `dhcrelay` processes of the relay (not their reapers). */
  const running = async () =>
    (await processesMentioning(relays.pidFile(port))).filter(
      (line) => /\bdhcrelay\b.* -id hzr/.test(line) && !/reaper/.test(line),
    )

  await Promise.all([
    relays.ensure(spec),
    relays.ensure(spec),
    relays.ensure({ ...spec, dhcpServer: '192.0.2.54' }),
  ])
  const one = await running()
  t.equal(one.length, 1, 'one dhcrelay for three starts at once')
  t.match(one[0], /192\.0\.2\.54$/, 'with the settings asked for last')
  t.ok(relays.isRunning('group-a'))

  await Promise.all([relays.stop('group-a'), relays.ensure(spec), relays.stop('group-a')])
  t.ok(
    await eventually(async () => (await running()).length === 0, 10_000),
    'a stop asked for last leaves none running',
  )
  t.notOk(relays.isRunning('group-a'))
})

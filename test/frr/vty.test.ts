import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { createVty, parseBgpSettings, renderBgpdConfig } from '../../lib/frr/index.ts'
import { withStack } from '../helpers/stack.ts'
import { eventually } from './fixtures.ts'

const settings = parseBgpSettings({ localAs: 65001, routerId: '127.0.0.1', peers: [] })

t.test(
  "bgpd's vty: sessions in order, refused lines named, back after bgpd restarts",
  async (t) => {
    const stack = await withStack(t, {
      redis: false,
      frr: { bgpdConfig: renderBgpdConfig(settings) },
    })
    const vtyDir = stack.frr?.vtyDir
    if (!vtyDir) throw new Error('no FRR')
    const vty = createVty({ vtyDir, reconnectMs: 100 })
    t.teardown(() => vty.close())
    let reconnects = 0
    vty.onReconnect(() => reconnects++)

    // Two sessions sent at once are answered in order, each line with its own status.
    const [configured, shown] = await Promise.all([
      vty.session([
        'configure terminal',
        'router bgp 65001',
        ' address-family ipv4 unicast',
        '  network 198.51.100.1/32',
        ' exit-address-family',
        'end',
      ]),
      vty.session(['show bgp ipv4 unicast 198.51.100.1/32 json', 'show no-such-thing']),
    ])
    t.same(
      configured.map((r) => r.status),
      [0, 0, 0, 0, 0, 0],
    )
    t.match(JSON.parse(shown[0]?.output ?? ''), { prefix: '198.51.100.1/32' })
    t.not(shown[1]?.status, 0, 'an unknown command has a failing status')
    t.match(shown[1]?.output, /Unknown command/)

    await t.rejects(
      vty.configure(['router bgp 65001', ' no-such-line here', 'exit']),
      { code: 'FRR_VTYSH_FAILED', message: /refused 'no-such-line here'/ },
      'configure names the refused line',
    )
    await vty.save()
    t.match(
      await readFile(join(vtyDir, 'bgpd.conf'), 'utf8'),
      /network 198\.51\.100\.1\/32/,
      "write file saves to bgpd's own config file",
    )

    // bgpd dies: the embedded stack starts it again from the file it saved.
    const pid = Number((await readFile(join(vtyDir, 'bgpd.pid'), 'utf8')).trim())
    process.kill(pid, 'SIGKILL')
    // While it is down (until the stack has started it again), a session fails, retryably.
    let down: unknown
    for (let i = 0; i < 100 && down === undefined; i++) {
      down = await vty.show('show bgp summary json').then(
        () => undefined,
        (error: unknown) => error,
      )
      if (down === undefined) await new Promise((r) => setTimeout(r, 10))
    }
    t.match(down, { code: 'FRR_VTYSH_FAILED', retryable: true }, 'while down: retryable')
    await eventually(
      async () => reconnects,
      (n) => n > 0,
    )
    t.equal(reconnects, 1, 'one reconnect reported')
    t.match(
      await vty.show('show bgp ipv4 unicast 198.51.100.1/32 json'),
      /"prefix":"198\.51\.100\.1\/32"/,
      'the restarted bgpd announces what was saved',
    )
  },
)

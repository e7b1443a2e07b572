/**
 * The FRR sidecar's command, run here against Debian's bgpd with its directories moved
 * into a test directory: it fills in the node's router id, the controller reaches it over
 * the shared vty socket (lib/frr/vty.ts, as the controller does), and what bgpd saves is
 * what a restarted container starts from. Skipped where FRR is not installed.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { FRR_SCRIPT, frrConfigMap } from '../../infra/k8s/controller.ts'
import { parseManifestOptions } from '../../infra/k8s/options.ts'
import { createVty } from '../../lib/frr/vty.ts'

const hasBgpd = await access('/usr/lib/frr/bgpd').then(
  () => true,
  () => false,
)

t.test(
  'the FRR sidecar: router id, vty socket, saved configuration',
  { skip: !hasBgpd && 'FRR is not installed' },
  async (t) => {
    // Short: a unix socket's path holds at most 107 bytes.
    const dir = await mkdtemp(join(tmpdir(), 'hz-frr-'))
    for (const sub of ['template', 'etc', 'run']) await mkdir(join(dir, sub))
    const options = parseManifestOptions({
      bgp: { asn: 65001, peers: [{ address: '192.0.2.1', remoteAs: 65000 }] },
      centrals: {
        controllerCidrs: ['192.0.2.0/24'],
        dpuCidrs: ['198.51.100.0/24'],
        plaintextSouthbound: true,
        plaintextNorthbound: true,
      },
    })
    await writeFile(
      join(dir, 'template', 'bgpd.conf'),
      frrConfigMap(options).data?.['bgpd.conf'] ?? '',
    )
    const script = FRR_SCRIPT.replaceAll('/etc/hydrazine/frr', join(dir, 'template'))
      .replaceAll('/etc/frr', join(dir, 'etc'))
      .replaceAll('/var/run/frr', join(dir, 'run'))
    let bgpd: ChildProcess | undefined
    const start = () => {
      bgpd = spawn('/bin/sh', ['-c', script], {
        env: { PATH: process.env.PATH ?? '', ROUTER_ID: '192.0.2.10' },
        stdio: 'ignore',
      })
    }
    const stop = () =>
      new Promise<void>((done) => {
        if (!bgpd || bgpd.exitCode !== null) return done()
        bgpd.once('exit', () => done())
        bgpd.kill('SIGTERM')
      })
    t.teardown(async () => {
      await stop()
      await rm(dir, { recursive: true, force: true })
    })

    start()
    const vty = createVty({ vtyDir: join(dir, 'run'), reconnectMs: 50 })
    t.teardown(() => vty.close())
    const running = await eventually(() => vty.show('show running-config'))
    t.match(running, /router bgp 65001\n bgp router-id 192\.0\.2\.10\n/, "the node's address")
    t.match(running, / neighbor 192\.0\.2\.1 remote-as 65000/)

    await vty.configure([
      'router bgp 65001',
      ' address-family ipv4 unicast',
      '  network 203.0.113.7/32',
      ' exit-address-family',
      'exit',
    ])
    await vty.save()
    t.match(await readFile(join(dir, 'etc', 'bgpd.conf'), 'utf8'), /network 203\.0\.113\.7\/32/)

    await stop()
    start()
    const again = await eventually(async () => {
      const text = await vty.show('show running-config')
      if (!text.includes('203.0.113.7')) throw new Error('not yet')
      return text
    })
    t.match(again, /network 203\.0\.113\.7\/32/, 'a restarted bgpd starts from what it saved')
  },
)

/** Retries `check` until it passes (10 s at most). */
async function eventually<T>(check: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await check()
    } catch (error) {
      if (i >= 100) throw error
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

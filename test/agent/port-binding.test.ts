/**
 * `southboundReleased` against a real Southbound: a logical port counts as released from
 * this chassis only when the SB said so. A Southbound the agent cannot ask — down, or
 * `ssl:` without the DPU's TLS material — never counts as released.
 */
import t from 'tap'
import { southboundReleased } from '../../agent/port-binding.ts'
import { run } from '../../infra/lab/dpu.ts'
import { freePort } from '../../lib/process/ports.ts'
import { withStack } from '../helpers/stack.ts'

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

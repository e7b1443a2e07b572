/**
 * Centrals the operator runs (`HYDRAZINE_OVN_CENTRAL=external`): a group the centrals file
 * does not name yet stays Provisioning, saying why; once the operator adds it, the group is
 * Ready and its rows are in that central, and its DPUs follow that central's SB.
 */
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { openExternalCentrals } from '../../infra/centrals/external.ts'
import { startOvnCentral } from '../../infra/local/ovn-central.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import type { Teardown } from '../helpers/stack.ts'
import { tempDir } from '../helpers/stack.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

const run = promisify(execFile)

async function ctl(tool: 'ovn-nbctl' | 'ovn-sbctl', db: string, ...args: string[]) {
  return (await run(tool, [`--db=${db}`, '--timeout=10', ...args])).stdout
}

/** A central as an operator runs it, outside Hydrazine: its entry for the centrals file. */
async function operatorCentral(t: Teardown, dir: string) {
  const pki = await openCertificateAuthority(join(dir, 'pki'))
  const { central, daemons } = await startOvnCentral({ dir, pki })
  t.teardown(async () => {
    for (const daemon of [...daemons].reverse()) await daemon.stop()
  })
  return { nb: central.nb.unix, sb: central.sb.remote, sbController: central.sb.unix }
}

t.test('a group waits for its central to be named, then is Ready in it', async (t) => {
  const dir = await tempDir(t)
  const centralA = await operatorCentral(t, join(dir, 'a'))
  const centralB = await operatorCentral(t, join(dir, 'b'))
  const file = join(dir, 'centrals.json')
  await writeFile(file, JSON.stringify({}))
  const centrals = await openExternalCentrals({ file })
  const p = await startPipeline(t, { ovn: centrals })
  await p.agent('dpu-1')

  await p.client.applyGroup('group-a', groupSpec())
  const waiting = await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.conditions.some((c) => c.reason === 'CentralNotConfigured') ?? false,
  )
  t.equal(waiting?.status.phase, 'Provisioning', 'not in the file: still Provisioning')
  t.match(
    waiting?.status.conditions,
    [
      {
        type: 'OvnConfigured',
        status: 'False',
        reason: 'CentralNotConfigured',
        message: `OVN central of group group-a: not named in ${file} yet`,
      },
    ],
    'saying why',
  )
  t.same(await ctl('ovn-nbctl', centralA.nb, 'ls-list'), '', 'nothing written anywhere')

  // The operator names the group's central; no restart.
  await writeFile(file, JSON.stringify({ 'group-a': centralA, 'group-b': centralB }))
  const ready = await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.phase === 'Ready',
    60_000,
  )
  t.equal(ready?.status.phase, 'Ready', 'named: Ready')
  t.same(ready?.status.ovnCentral, { nb: centralA.nb, sb: centralA.sb }, 'in that central')
  t.match(ready?.status.conditions, [{ type: 'OvnConfigured', status: 'True' }])
  t.match(await ctl('ovn-nbctl', centralA.nb, 'ls-list'), topologyNames.switch('group-a'))
  t.match(await ctl('ovn-nbctl', centralA.nb, 'lr-list'), topologyNames.router('group-a'))

  await t.test(
    "a host's DPU follows the group's SB, and leaves no chassis when it moves",
    async (t) => {
      await p.client.applyHost('host-a', hostSpec('group-a', 'dpu-1', 1))
      const hostA = await until(
        () => p.client.getHost('host-a'),
        (h) => h?.status.phase === 'Ready',
        60_000,
      )
      t.equal(hostA?.status.phase, 'Ready', 'bound in the SB the file names')
      t.match(
        await ctl('ovn-nbctl', centralA.nb, 'lsp-list', topologyNames.switch('group-a')),
        topologyNames.hostPort('group-a', 'host-a'),
        "the host's port is in group-a's NB",
      )
      const chassisIn = (sb: string) =>
        ctl('ovn-sbctl', sb, '--bare', '--columns=name', 'list', 'Chassis')
      t.match(await chassisIn(centralA.sbController), /dpu-1/)

      await p.client.deleteHost('host-a')
      await until(
        () => p.client.getHost('host-a'),
        (h) => !h,
      )
      await p.client.applyGroup('group-b', groupSpec())
      await p.client.applyHost('host-b', hostSpec('group-b', 'dpu-1', 2))
      const hostB = await until(
        () => p.client.getHost('host-b'),
        (h) => h?.status.phase === 'Ready',
        60_000,
      )
      t.equal(hostB?.status.phase, 'Ready', 'the DPU serves group-b, in its own central')
      t.match(await chassisIn(centralB.sbController), /dpu-1/)
      t.notMatch(
        await chassisIn(centralA.sbController),
        /dpu-1/,
        "group-a's SB has no chassis row for dpu-1 any more",
      )
    },
  )
})

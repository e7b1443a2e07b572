/**
 * Centrals the operator names in HYDRAZINE_OVN_CENTRALS_FILE: read again when the file
 * changes, a bad change refused (the last good mapping stays), and a group not named yet
 * told to retry.
 */
import { rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openExternalCentrals } from '../../infra/centrals/external.ts'
import { ConfigError } from '../../lib/errors.ts'
import { CentralUnavailableError } from '../../lib/ovn/central.ts'

const A = { nb: 'ssl:10.0.0.5:6641', sb: 'ssl:10.0.0.5:6642' }
const B = { nb: 'tcp:10.0.0.6:6641', sb: 'tcp:10.0.0.6:6642', sbController: 'unix:/run/b/sb.sock' }

async function opened(t: Test, content: object) {
  const dir = t.testdir({})
  const file = join(dir, 'centrals.json')
  await writeFile(file, JSON.stringify(content))
  const lines: string[] = []
  const centrals = await openExternalCentrals({ file, log: (line) => lines.push(line) })
  return { file, lines, centrals }
}

/** What `ensure` rejects with, or undefined when it resolves. */
async function refusal(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  )
}

t.test('each group gets the remotes the file names; release leaves them alone', async (t) => {
  const { file, centrals } = await opened(t, { 'tenant-a': A, 'tenant-b': B })
  t.equal(centrals.file, file)
  t.same(await centrals.ensure('tenant-a'), {
    ...A,
    sbController: A.sb,
    service: 'external-tenant-a',
    group: 'tenant-a',
  })
  t.same(await centrals.ensure('tenant-b'), {
    ...B,
    service: 'external-tenant-b',
    group: 'tenant-b',
  })
  t.same(
    (await centrals.list()).map((c) => c.nb),
    [A.nb, B.nb],
    'list: every central the file names',
  )
  t.same(await centrals.groups(), ['tenant-a', 'tenant-b'], 'groups: every group it names')
  await centrals.release('tenant-a')
  t.equal((await centrals.ensure('tenant-a')).nb, A.nb, 'the operator owns it: release is a no-op')
})

t.test('a group the file does not name yet: retry until the operator adds it', async (t) => {
  const { file, lines, centrals } = await opened(t, { 'tenant-a': A })
  const error = await refusal(centrals.ensure('tenant-b'))
  t.type(error, CentralUnavailableError)
  t.match(error, {
    code: 'OVN_CENTRAL_UNAVAILABLE',
    retryable: true,
    reason: 'CentralNotConfigured',
    group: 'tenant-b',
    message: `OVN central of group tenant-b: not named in ${file} yet`,
  })

  await writeFile(file, JSON.stringify({ 'tenant-a': A, 'tenant-b': B }))
  t.equal((await centrals.ensure('tenant-b')).nb, B.nb, 'added: found without a restart')
  t.same(await centrals.groups(), ['tenant-a', 'tenant-b'])
  t.match(lines, [/centrals\.json read: 2 group\(s\)/], 'the change is logged')

  // Rewritten at once, to the same size: the file's times may not tell, its text does.
  await writeFile(
    file,
    JSON.stringify({ 'tenant-a': A, 'tenant-b': { ...B, nb: 'tcp:10.0.0.7:6641' } }),
  )
  t.equal((await centrals.ensure('tenant-b')).nb, 'tcp:10.0.0.7:6641', 'a rewrite of the same size')

  // Replaced by rename, as editors and Kubernetes volume updates do.
  await writeFile(`${file}.new`, JSON.stringify({ 'tenant-b': B }))
  await rename(`${file}.new`, file)
  t.type(await refusal(centrals.ensure('tenant-a')), CentralUnavailableError, 'removed: gone')
  t.same(await centrals.groups(), ['tenant-b'])
})

t.test('a bad change is logged and refused; the last good mapping stays', async (t) => {
  const { file, lines, centrals } = await opened(t, { 'tenant-a': A })
  await writeFile(
    file,
    JSON.stringify({ 'tenant-a': A, 'tenant-b': { ...B, sb: '10.0.0.6:6642' } }),
  )
  t.equal((await centrals.ensure('tenant-a')).nb, A.nb, 'tenant-a still has its central')
  t.same(await centrals.groups(), ['tenant-a'], 'the bad change is not in use')
  t.equal(lines.length, 1)
  t.match(
    lines[0],
    /^OVN centrals file refused, the last good one \(1 group\(s\)\) stays: HYDRAZINE_OVN_CENTRALS_FILE: .*centrals\.json: tenant-b\.sb: must be an OVSDB remote/,
    'the log names the group and field',
  )
  const error = await refusal(centrals.ensure('tenant-b'))
  t.match(
    (error as Error).message,
    /not named in .*centrals\.json yet; the file's last change was refused: .*tenant-b\.sb: must be an OVSDB remote/,
    'a group waiting for it is told why',
  )
  await centrals.ensure('tenant-a')
  t.equal(lines.length, 1, 'logged once, not on every call')

  await writeFile(file, '{"tenant-a": ')
  t.equal((await centrals.ensure('tenant-a')).nb, A.nb, 'half a file: still the last good one')
  t.match(lines[1], /centrals\.json: not JSON/)

  await rm(file)
  t.equal((await centrals.ensure('tenant-a')).nb, A.nb, 'no file: still the last good one')
  t.match(lines[2], /centrals\.json: cannot read: ENOENT/)

  await writeFile(file, JSON.stringify({ 'tenant-a': A, 'tenant-b': B }))
  t.equal((await centrals.ensure('tenant-b')).nb, B.nb, 'fixed: the new mapping is used')
  t.match(lines[3], /centrals\.json read: 2 group\(s\)/)
})

t.test('a bad file when opened is a configuration error naming the field', async (t) => {
  const dir = t.testdir({
    'bad.json': JSON.stringify({ 'tenant-a': { nb: A.nb } }),
  })
  const cases: [string, string, RegExp][] = [
    [
      'a missing field',
      join(dir, 'bad.json'),
      /^HYDRAZINE_OVN_CENTRALS_FILE: .*bad\.json: tenant-a\.sb: is required$/,
    ],
    [
      'a missing file',
      join(dir, 'none.json'),
      /^HYDRAZINE_OVN_CENTRALS_FILE: .*none\.json: cannot read: ENOENT$/,
    ],
  ]
  for (const [name, file, message] of cases) {
    const error = await refusal(openExternalCentrals({ file }))
    t.type(error, ConfigError, name)
    t.match((error as Error).message, message, name)
  }
})

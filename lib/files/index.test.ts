import { readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { removeLeftovers, renameDurably, tempNameFor, writeFileAtomic } from './index.ts'

const mode = async (path: string) => (await stat(path)).mode & 0o777

t.test('writeFileAtomic: the whole new content, no temp file left, the mode asked', async (t) => {
  const dir = t.testdir({ token: 'old\n' })
  const file = join(dir, 'token')
  await writeFileAtomic(file, 'new\n', { mode: 0o600 })
  t.equal(await readFile(file, 'utf8'), 'new\n')
  t.equal(await mode(file), 0o600)
  t.same(await readdir(dir), ['token'], 'only the target in the directory')
  await writeFileAtomic(join(dir, 'bytes'), new Uint8Array([1, 2, 3]))
  t.same([...(await readFile(join(dir, 'bytes')))], [1, 2, 3])
})

t.test('writeFileAtomic: a failed write leaves the old file and no temp file', async (t) => {
  const dir = t.testdir({ port: '6642\n' })
  await t.rejects(writeFileAtomic(join(dir, 'missing', 'port'), '1\n'), { code: 'ENOENT' })
  t.same(await readdir(dir), ['port'])
  t.equal(await readFile(join(dir, 'port'), 'utf8'), '6642\n')
})

t.test('renameDurably moves a finished file into place', async (t) => {
  const dir = t.testdir({})
  const temp = tempNameFor(join(dir, 'nb.db'))
  await writeFile(temp, 'whole')
  await renameDurably(temp, join(dir, 'nb.db'))
  t.same(await readdir(dir), ['nb.db'])
})

t.test('removeLeftovers removes only the temp files of that target', async (t) => {
  const left = tempNameFor('nb.db')
  const lock = `.${left}.~lock~`
  const dir = t.testdir({
    'nb.db': 'x',
    [left]: '',
    [lock]: '',
    'sb.db.12.ab.tmp': '',
    'nb.db.served': '',
    'nb.dbx.1.a.tmp': '',
  })
  t.same((await removeLeftovers(join(dir, 'nb.db'))).sort(), [lock, left].sort())
  t.same((await readdir(dir)).sort(), [
    'nb.db',
    'nb.db.served',
    'nb.dbx.1.a.tmp',
    'sb.db.12.ab.tmp',
  ])
  t.same(await removeLeftovers(join(dir, 'nb.db')), [], 'nothing more the second time')
})

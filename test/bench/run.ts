/**
 * `npm run bench -- <suite> [<suite>…]` runs `test/bench/<suite>.bench.ts` (its default
 * export) for each suite named, or every suite when none is named.
 */
import { readdir } from 'node:fs/promises'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
const available = (await readdir(here))
  .filter((f) => f.endsWith('.bench.ts'))
  .map((f) => f.slice(0, -'.bench.ts'.length))
  .sort()

const wanted = process.argv.slice(2)
const unknown = wanted.filter((s) => !available.includes(s))
if (unknown.length > 0) {
  process.stderr.write(
    `unknown bench suite(s): ${unknown.join(', ')}; available: ${available.join(', ')}\n`,
  )
  process.exit(2)
}

for (const suite of wanted.length > 0 ? wanted : available) {
  process.stderr.write(`bench ${suite}…\n`)
  const mod: { default?: unknown } = await import(pathToFileURL(`${here}${suite}.bench.ts`).href)
  if (typeof mod.default !== 'function') throw new Error(`${suite}.bench.ts has no default export`)
  await mod.default()
}
// Done: a stopped daemon's stop timer (`Daemon.stop` in lib/process/daemon.ts) would keep
// Node alive for up to 5 s more.
process.exit(0)

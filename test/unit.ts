/**
 * `npm run test:unit`: every unit test (the `*.test.ts` files beside the code in lib/,
 * functions/, queues/, app/, api/, agent/, infra/ and proto/) in ONE process, so the suite costs
 * its tests' time and not one Node start per file. `npm test` still runs each file in a
 * process of its own.
 */
import { readdir } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const FOLDERS = ['lib', 'functions', 'queues', 'app', 'api', 'agent', 'infra', 'proto']

async function testFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory() && e.name !== 'node_modules' && e.name !== 'gen'
        ? testFiles(join(dir, e.name))
        : Promise.resolve(e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []),
    ),
  )
  return nested.flat()
}

const files = (await Promise.all(FOLDERS.map((f) => testFiles(join(root, f))))).flat().sort()
for (const file of files) {
  process.stderr.write(`# ${relative(root, file)}\n`)
  await import(pathToFileURL(file).href)
}

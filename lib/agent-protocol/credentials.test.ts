import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import t from 'tap'
import { DPU_REDIS_COMMANDS, dpuRedisAclRules } from './credentials.ts'

/** The scripts a BullMQ worker runs for the jobs it takes (the agent's only use of Redis). */
const WORKER_SCRIPTS = [
  'moveToActive',
  'moveToFinished',
  'moveToDelayed',
  'retryJob',
  'extendLock',
  'extendLocks',
  'moveStalledJobsToWait',
  'moveJobFromActiveToWait',
  'releaseLock',
  'updateProgress',
  'updateData',
  'addLog',
  'saveStacktrace',
  'getRateLimitTtl',
  'isMaxed',
]

const commandsDir = join(
  dirname(createRequire(import.meta.url).resolve('bullmq')),
  '..',
  'esm',
  'commands',
)

/** A script's text with every `--- @include` it names, and theirs, inlined once. */
async function withIncludes(file: string, seen = new Set<string>()): Promise<string> {
  if (seen.has(file)) return ''
  seen.add(file)
  const text = await readFile(file, 'utf8')
  const included = await Promise.all(
    [...text.matchAll(/--- @include "([^"]+)"/g)].map(async ([, name]) => {
      const candidates = [join(dirname(file), `${name}.lua`), join(commandsDir, `${name}.lua`)]
      for (const candidate of candidates) {
        const found = await readFile(candidate, 'utf8').then(
          () => candidate,
          () => undefined,
        )
        if (found) return withIncludes(found, seen)
      }
      throw new Error(`${file} includes ${name}, which is nowhere`)
    }),
  )
  return [text, ...included].join('\n')
}

t.test("the DPU allow-list covers every command BullMQ's worker scripts call", async (t) => {
  const { readdir } = await import('node:fs/promises')
  const files = await readdir(commandsDir)
  const allowed = new Set(DPU_REDIS_COMMANDS)
  const needed = new Set<string>()
  for (const script of WORKER_SCRIPTS) {
    const file = files.find((f) => f.startsWith(`${script}-`) && f.endsWith('.lua'))
    if (!file) {
      t.fail(`BullMQ has no ${script} script any more: look at what its worker runs now`)
      continue
    }
    const text = await withIncludes(join(commandsDir, file))
    for (const [, command] of text.matchAll(/(?:rcall|redis\.p?call)\(\s*["']([A-Za-z]+)["']/g)) {
      needed.add((command as string).toLowerCase())
    }
    // A list push whose side a job option picks.
    if (/rcall\(pushCmd/.test(text)) needed.add('lpush').add('rpush')
  }
  t.ok(needed.size > 20, `read ${needed.size} commands from the worker's scripts`)
  t.same([...needed].filter((c) => !allowed.has(c)).sort(), [], 'every one is allowed')
})

t.test('the rules allow nothing but the list, on the DPU own keys', async (t) => {
  const rules = dpuRedisAclRules('dpu-1', 'pw', 'bull')
  t.equal(rules.indexOf('-@all') < rules.indexOf('+evalsha'), true, 'everything off, then the list')
  t.notOk(
    rules.some((r) => r.startsWith('+@') || r === 'allcommands' || r === '~*' || r === 'allkeys'),
    'no category, no wildcard',
  )
  for (const refused of [
    'client|tracking',
    'debug',
    'object',
    'keys',
    'config',
    'scan',
    'monitor',
  ]) {
    t.notOk(DPU_REDIS_COMMANDS.includes(refused), `${refused} is not on the list`)
  }
})

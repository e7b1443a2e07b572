/**
 * The producers file (`HYDRAZINE_PRODUCERS_FILE`): each queue producer by id, whom it acts
 * as, and its Redis password's SHA-256.
 *
 * @example
 * { "carbide": { "operator": true, "passwordSha256": "5e88…" },
 *   "ci-a": { "tenant": "tenant-a", "passwordSha256": "9f86…" } }
 */
import { readFile } from 'node:fs/promises'
import * as v from 'valibot'
import { ConfigError } from '../../lib/errors.ts'
import { type Producer, ProducersFile, producersOf } from '../../lib/jobs/producers.ts'

/** Parses a producers document; a ConfigError names every bad field. */
export function parseProducers(input: unknown): Producer[] {
  const result = v.safeParse(ProducersFile, input)
  if (!result.success) {
    const issues = result.issues.map((i) => ({
      path: v.getDotPath(i) ?? '(file)',
      message: i.message,
    }))
    throw new ConfigError(
      `invalid producers file: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      issues,
    )
  }
  return producersOf(result.output)
}

/** Reads and parses the producers file. */
export async function loadProducers(file: string): Promise<Producer[]> {
  const text = await readFile(file, 'utf8')
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new ConfigError(`producers file ${file} is not JSON: ${String(error)}`)
  }
  return parseProducers(json)
}

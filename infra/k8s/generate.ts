/**
 * `npm run k8s -- --config options.json [--out DIR]`: Hydrazine's Kubernetes manifests
 * (infra/k8s/README.md). Builds every object from the options (infra/k8s/options.ts: all
 * have defaults but `centrals.controllerCidrs`, `centrals.sbTlsSecret` or
 * `centrals.plaintextSouthbound: true`, and `centrals.nbTlsSecret` or
 * `centrals.plaintextNorthbound: true`: without a file it refuses), validates each against the
 * Kubernetes schemas, and writes one multi-document YAML stream: to `DIR/hydrazine.yaml`,
 * or to stdout. Exit code 0 written, 1 an object did not validate, 2 bad options or usage.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { ConfigError } from '../../lib/errors.ts'
import { dpuSecretName } from './agent.ts'
import {
  buildManifests,
  describe,
  InvalidManifestError,
  toYaml,
  validateManifests,
} from './manifests.ts'
import { centralsNamespace, chassisCas, parseManifestOptions } from './options.ts'

/** Generates; returns the YAML and where it went (undefined: the caller prints it). */
export async function generate(args: readonly string[]): Promise<{ yaml: string; file?: string }> {
  const { values } = parseArgs({
    args: [...args],
    options: { config: { type: 'string' }, out: { type: 'string' } },
    strict: true,
  })
  const input = values.config ? await readOptions(values.config) : {}
  const options = parseManifestOptions(input)
  const objects = buildManifests(options)
  validateManifests(objects)
  const yaml = toYaml(objects)
  if (!values.out) return { yaml }
  const dir = resolve(values.out)
  await mkdir(dir, { recursive: true })
  const file = join(dir, 'hydrazine.yaml')
  await writeFile(file, yaml)
  const secrets = options.dpus.map(
    (d) => `  DPU ${d.id} (node ${d.node}) reads Secret ${options.namespace}/${dpuSecretName(d)}`,
  )
  const { sbTlsSecret, nbTlsSecret } = options.centrals
  const centralSecrets = [sbTlsSecret, nbTlsSecret].flatMap((name) =>
    name === undefined ? [] : [`  the centrals read Secret ${centralsNamespace(options)}/${name}`],
  )
  const dpuCa = chassisCas(options)
    ? [`  the controller reads Secret ${options.namespace}/${options.secrets.dpuCa} (ca.crt only)`]
    : []
  process.stderr.write(
    `${[...objects.map((o) => `  ${describe(o)}`), ...secrets, ...centralSecrets, ...dpuCa].join('\n')}\n`,
  )
  return { yaml, file }
}

async function readOptions(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    const why =
      error instanceof SyntaxError ? 'not valid JSON' : (error as NodeJS.ErrnoException).code
    throw new ConfigError(`--config ${path}: cannot read: ${why ?? 'error'}`)
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const { yaml, file } = await generate(process.argv.slice(2))
    if (file) process.stderr.write(`wrote ${file}\n`)
    else process.stdout.write(yaml)
  } catch (error) {
    process.stderr.write(`k8s: ${(error as Error).message}\n`)
    process.exit(error instanceof InvalidManifestError ? 1 : 2)
  }
}

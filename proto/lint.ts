/**
 * Lints Hydrazine's `.proto` files by buf's DEFAULT rules (buf itself is not available
 * here), over each file as protobufjs parses it:
 *
 * - files lower_snake_case, in the directory their package names (`hydrazine.v1` →
 *   `hydrazine/v1/`), the package lower_snake_case and versioned (`v1`, `v1beta1`);
 * - messages, enums, services and RPCs PascalCase; fields and oneofs lower_snake_case;
 * - enum values UPPER_SNAKE_CASE, prefixed with the enum's name (`HostAccess` →
 *   `HOST_ACCESS_`), the zero value `<PREFIX>_UNSPECIFIED`;
 * - services suffixed `Service`; each RPC with its own `<Rpc>Request` and
 *   `<Rpc>Response` (or `<Service><Rpc>…`), used by no other RPC.
 *
 * Vendored files (`google/`, `grpc/`) keep their upstream names and are not linted, as
 * buf's `ignore` would have them.
 *
 * @example npx tsx proto/lint.ts   # prints each problem, exits 1 if there is any
 */
import { readdir, readFile } from 'node:fs/promises'
import { join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import protobuf from 'protobufjs'
import { PROTO_DIR } from './load.ts'

/** Folders of vendored protos, linted by their owners. */
export const VENDORED = ['google/', 'grpc/']

const PASCAL = /^[A-Z][A-Za-z0-9]*$/
const LOWER_SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/
const UPPER_SNAKE = /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/
const VERSION = /^v\d+((alpha|beta)\d*)?(test)?$/

/** `HostAccess` → `HOST_ACCESS`. */
const upperSnake = (name: string) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1_$2')
    .toUpperCase()

/** Every problem of one file; `path` is relative to the proto root, with `/`. */
export function lintProto(path: string, source: string): string[] {
  const problems: string[] = []
  const report = (what: string, problem: string) => problems.push(`${path}: ${what} ${problem}`)
  const parsed = protobuf.parse(source, { keepCase: true, alternateCommentMode: true })
  const pkg = parsed.package ?? ''
  const file = path.split('/').at(-1) ?? path
  if (!LOWER_SNAKE.test(file.replace(/\.proto$/, ''))) report('file', 'is not lower_snake_case')
  if (!pkg) report('package', 'is missing')
  else {
    const parts = pkg.split('.')
    if (!parts.every((p) => LOWER_SNAKE.test(p)))
      report(`package ${pkg}`, 'is not lower_snake_case')
    if (!VERSION.test(parts.at(-1) ?? ''))
      report(`package ${pkg}`, 'does not end in a version (v1, v1beta1)')
    const dir = path.split('/').slice(0, -1).join('/')
    if (dir !== parts.join('/'))
      report(`package ${pkg}`, `must live in ${parts.join('/')}/, not ${dir || '.'}/`)
  }

  const rpcTypes = new Map<string, string>()
  const visit = (object: protobuf.ReflectionObject) => {
    if (object instanceof protobuf.Type) {
      if (!PASCAL.test(object.name)) report(`message ${object.name}`, 'is not PascalCase')
      for (const field of object.fieldsArray) {
        if (!LOWER_SNAKE.test(field.name))
          report(`field ${object.name}.${field.name}`, 'is not lower_snake_case')
      }
      for (const oneof of object.oneofsArray) {
        // proto3 `optional` fields make a synthetic `_<field>` oneof.
        if (!oneof.name.startsWith('_') && !LOWER_SNAKE.test(oneof.name))
          report(`oneof ${object.name}.${oneof.name}`, 'is not lower_snake_case')
      }
    } else if (object instanceof protobuf.Enum) {
      const prefix = `${upperSnake(object.name)}_`
      if (!PASCAL.test(object.name)) report(`enum ${object.name}`, 'is not PascalCase')
      for (const [name, number] of Object.entries(object.values)) {
        if (!UPPER_SNAKE.test(name)) report(`enum value ${name}`, 'is not UPPER_SNAKE_CASE')
        if (!name.startsWith(prefix)) report(`enum value ${name}`, `is not prefixed ${prefix}`)
        if (number === 0 && name !== `${prefix}UNSPECIFIED`)
          report(`enum value ${name}`, `is zero: the zero value must be ${prefix}UNSPECIFIED`)
      }
    } else if (object instanceof protobuf.Service) {
      if (!PASCAL.test(object.name)) report(`service ${object.name}`, 'is not PascalCase')
      if (!object.name.endsWith('Service'))
        report(`service ${object.name}`, 'is not suffixed Service')
      for (const method of object.methodsArray) {
        const rpc = `rpc ${object.name}.${method.name}`
        if (!PASCAL.test(method.name)) report(rpc, 'is not PascalCase')
        for (const [type, suffix] of [
          [method.requestType, 'Request'],
          [method.responseType, 'Response'],
        ] as const) {
          const standard = [`${method.name}${suffix}`, `${object.name}${method.name}${suffix}`]
          if (!standard.includes(type))
            report(rpc, `${suffix.toLowerCase()} must be ${standard[0]}, not ${type}`)
          const user = rpcTypes.get(type)
          if (user !== undefined) report(rpc, `shares ${type} with ${user}`)
          rpcTypes.set(type, rpc)
        }
      }
    }
    if (object instanceof protobuf.Namespace) for (const nested of object.nestedArray) visit(nested)
  }
  visit(parsed.root)
  return problems
}

/** Every problem of every `.proto` under `dir` (default: this folder), vendored ones aside. */
export async function lintProtoDir(dir = PROTO_DIR): Promise<string[]> {
  const files = (await readdir(dir, { recursive: true }))
    .filter((f) => f.endsWith('.proto'))
    .map((f) => relative(dir, join(dir, f)).split(sep).join('/'))
    .filter((f) => !VENDORED.some((v) => f.startsWith(v)))
    .sort()
  // None found is a breach too: the lint would pass by checking nothing.
  if (files.length === 0) return [`no .proto file of ours under ${dir}`]
  const problems: string[] = []
  for (const file of files)
    problems.push(...lintProto(file, await readFile(join(dir, file), 'utf8')))
  return problems
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = await lintProtoDir()
  for (const problem of problems) console.error(problem)
  process.exitCode = problems.length > 0 ? 1 : 0
}

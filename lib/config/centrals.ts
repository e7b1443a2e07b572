/**
 * Where OVN centrals are, as the operator writes them: an OVSDB remote, and the
 * `HYDRAZINE_OVN_CENTRALS_FILE` that names each resource group's central
 * (`HYDRAZINE_OVN_CENTRAL=external`).
 */
import * as v from 'valibot'
import { ConfigError } from '../errors.ts'
import { Rfc1123Label } from '../model/objects.ts'

const REMOTE = 'must be an OVSDB remote: unix:/path, tcp:HOST:PORT or ssl:HOST:PORT'
const REMOTE_FORM = /^(unix:\/.+|(tcp|ssl):(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5})$/
const REMOTE_PORT = 'must be an OVSDB remote whose port is 1..65535'
const isPort = (s: string) => Number(s) >= 1 && Number(s) <= 65535

/** An OVSDB remote as OVS and OVN spell it: `unix:/path`, `tcp:HOST:PORT`, `ssl:HOST:PORT`. */
export const ovsdbRemote = v.pipe(
  v.string(REMOTE),
  v.regex(REMOTE_FORM, REMOTE),
  v.check(
    (s) => !REMOTE_FORM.test(s) || s.startsWith('unix:') || isPort(s.slice(s.lastIndexOf(':') + 1)),
    REMOTE_PORT,
  ),
)

/** One group's central, as `HYDRAZINE_OVN_CENTRALS_FILE` names it. */
export interface CentralRemotes {
  /** The NB remote, for the controller. */
  readonly nb: string
  /** The SB remote the group's DPUs' `ovn-controller` follow. */
  readonly sb: string
  /** The SB remote the controller checks DPU acks against (`sb` when the file has none). */
  readonly sbController: string
}

const FILE = 'must hold a JSON object: resource group name → {"nb", "sb", "sbController"?}'
const ENTRY = 'an entry is {"nb": REMOTE, "sb": REMOTE, "sbController"?: REMOTE}'

const CentralsFileSchema = v.record(
  Rfc1123Label,
  v.strictObject(
    { nb: ovsdbRemote, sb: ovsdbRemote, sbController: v.optional(ovsdbRemote) },
    (issue) => {
      if (issue.expected === 'never') return `is not a field (${ENTRY})`
      if (issue.received === 'undefined') return 'is required'
      return `must be an object: ${ENTRY}`
    },
  ),
  FILE,
)

/**
 * Parses the text of `HYDRAZINE_OVN_CENTRALS_FILE` (`file` is only for messages): a JSON
 * object mapping a resource group's name to its central's remotes. Throws ConfigError
 * naming the file, each group and field at fault. Two groups may not name the same NB or
 * SB: a DPU follows one group's SB at a time and leaves the previous group's when it
 * moves (for one central every group shares, `HYDRAZINE_OVN_CENTRAL=shared`).
 *
 * @example
 * parseCentralsFile('{"tenant-a": {"nb": "ssl:10.0.0.5:6641", "sb": "ssl:10.0.0.5:6642"}}', f)
 * // Map { 'tenant-a' => { nb: 'ssl:10.0.0.5:6641', sb: …, sbController: 'ssl:10.0.0.5:6642' } }
 * // {"tenant-a": {"nb": "10.0.0.5"}} → ConfigError: HYDRAZINE_OVN_CENTRALS_FILE: f:
 * //   tenant-a.nb: must be an OVSDB remote: …; tenant-a.sb: is required
 */
export function parseCentralsFile(text: string, file: string): ReadonlyMap<string, CentralRemotes> {
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch (error) {
    throw centralsFileError(file, [{ path: '', message: `not JSON: ${firstLine(error)}` }])
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw centralsFileError(file, [{ path: '', message: FILE }])
  }
  const parsed = v.safeParse(CentralsFileSchema, data)
  if (!parsed.success) {
    throw centralsFileError(
      file,
      parsed.issues.map((issue) => {
        const path = v.getDotPath(issue)
        const onKey = issue.path?.length === 1 && issue.path[0]?.origin === 'key'
        return {
          path: !path ? '' : onKey ? `group name ${path}` : path,
          message: issue.message,
        }
      }),
    )
  }
  const centrals = new Map<string, CentralRemotes>()
  const owners = new Map<string, string>()
  const issues: { path: string; message: string }[] = []
  for (const [group, entry] of Object.entries(parsed.output)) {
    for (const field of ['nb', 'sb'] as const) {
      const other = owners.get(`${field} ${entry[field]}`)
      if (other !== undefined) {
        issues.push({
          path: `${group}.${field}`,
          message:
            `is group ${other}'s ${field.toUpperCase()} too: each group needs a central of its ` +
            'own (one central every group shares: HYDRAZINE_OVN_CENTRAL=shared)',
        })
      }
      owners.set(`${field} ${entry[field]}`, group)
    }
    centrals.set(group, {
      nb: entry.nb,
      sb: entry.sb,
      sbController: entry.sbController ?? entry.sb,
    })
  }
  if (issues.length > 0) throw centralsFileError(file, issues)
  return centrals
}

/**
 * The ConfigError of a bad centrals file: `HYDRAZINE_OVN_CENTRALS_FILE: <file>: <issues>`,
 * each issue `group.field: message` (no path: the whole file).
 */
export function centralsFileError(
  file: string,
  issues: readonly { path: string; message: string }[],
): ConfigError {
  const what = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')
  return new ConfigError(`HYDRAZINE_OVN_CENTRALS_FILE: ${file}: ${what}`, issues)
}

const firstLine = (error: unknown) =>
  (error instanceof Error ? error.message : String(error)).split('\n')[0]

/**
 * Applying a group's topology to its NB: read the rows the group owns, diff them with the
 * compiled desired rows (`diff.ts`, pure), and commit only the difference in one
 * transaction, guarded so that a writer who lost a race re-reads and tries again.
 */
import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import { OvsdbTimedOut } from '../errors.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import type { NbTopologyCache } from './cache.ts'
import { compileGroupTopology, type DesiredRow, type DesiredRows, rowId } from './compile.ts'
import { diffTopology, GENERATION_KEY, GUARD_ID, type PortChanges } from './diff.ts'
import { TopologyApplyContention } from './errors.ts'
import { ownerOf } from './names.ts'
import { type ActualIndex, readOwnedRows } from './owned-rows.ts'
import type { GroupTopologySpec } from './spec.ts'

export { diffTopology, GENERATION_KEY, GUARD_ID, type PortChanges } from './diff.ts'
export {
  type ActualIndex,
  type ActualRow,
  type ActualRows,
  groupsInNb,
  type IndexedRow,
  IndexedRows,
  readOwnedRows,
} from './owned-rows.ts'

const nb = new Database<NbTables>(nbSchema)

export interface ApplyResult {
  /** True when a transaction was committed. */
  readonly changed: boolean
  /** Write operations committed (0 when NB already matched). */
  readonly ops: number
  /** Read-diff-commit rounds it took (more than 1 when another writer raced). */
  readonly attempts: number
  /**
   * The rows the committed transaction inserted, changed or deleted, by row id
   * (`<table>/<key>`, e.g. `Logical_Switch_Port/lsp/hz/group-a/host-1`); empty when
   * nothing was committed. What reconcile repaired, when it is reconcile that applies.
   */
  readonly touched: readonly string[]
  /**
   * The touched rows where NB differed from what the last apply through the same cache
   * left there: a row changed or removed behind Hydrazine's back, or one NB gained. A
   * row written for the first time, or because the desired state changed, is not drift.
   * Without a cache, or before its first apply of the group, every touched row.
   */
  readonly drifted: readonly string[]
  /**
   * Desired rows the last round compared with NB: every row of the group, or with a cache
   * that saw NB match the group's previous compile, only the rows that changed since.
   */
  readonly compared: number
  /** The logical switch ports the committed transaction inserted and deleted. */
  readonly ports: PortChanges
}

export interface ApplyOptions {
  /** Give up with `TopologyApplyContention` after this many lost races. Default 8. */
  readonly maxAttempts?: number
  /**
   * Read owned rows from this monitor-fed cache instead of selecting them (one round
   * trip less and no table scans on the server). A stale cache only costs a retry.
   */
  readonly cache?: NbTopologyCache
  /**
   * The group whose desired rows `desiredRows` reads (a function reading state elsewhere,
   * e.g. Redis). With a cache, the group's NB generation is noted BEFORE that read: a
   * write by another process between the two (of a member this read did not see yet)
   * shows as a newer generation, and the apply starts over instead of undoing it.
   */
  readonly group?: string
  /**
   * With a cache: its first read waits until every update NB sent before an `echo` round
   * trip has been applied, so the diff sees NB as of the call — a change made by another
   * client a moment ago (an operator's edit) included, not only what a stale cache would
   * retry on. For applies that compare every row (reconcile's check).
   */
  readonly sync?: boolean
}

/**
 * Converges NB to the group's compiled topology: reads the rows the group owns, diffs,
 * and commits only the difference in one transaction guarded by `wait` on the owned
 * rows' `_version` (retried from the read when another writer got there first).
 * Applying the same spec twice commits nothing the second time. Rows without the
 * group's owner `external_ids` are never touched.
 *
 * @example
 * const { changed } = await applyGroupTopology(client, spec)
 */
export function applyGroupTopology(
  client: OvsdbClient,
  spec: GroupTopologySpec | (() => Promise<GroupTopologySpec>),
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  return applyDesiredRows(
    client,
    typeof spec === 'function'
      ? async () => compileGroupTopology(await spec(), options.cache?.compiled)
      : compileGroupTopology(spec, options.cache?.compiled),
    options,
  )
}

/** Removes every row the group owns (the apply of an empty desired state). */
export function deleteGroupTopology(
  client: OvsdbClient,
  groupName: string,
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  options.cache?.compiled.forget(groupName)
  return applyDesiredRows(
    client,
    { group: groupName, owner: ownerOf(groupName), rows: [] },
    options,
  )
}

/**
 * `desired` may be a function: it is called again after every lost race. Pass one when
 * the desired state is read from a store that other writers change too (the group's
 * members): the loser of a race must not re-commit what it read before the winner's
 * change, or it would undo that change.
 */
/**
 * Of the `touched` row ids, those where NB differed from `before` (the desired rows last
 * left in NB): a row both want alike, or one NB holds that neither wants. Without
 * `before`, all of them (nothing tells what was applied).
 */
export function driftedRows(
  touched: readonly string[],
  desired: DesiredRows,
  before: DesiredRows | undefined,
): string[] {
  if (!before) return [...touched]
  const was = byRowId(before)
  const now = byRowId(desired)
  return touched.filter((id) => {
    const wanted = now.get(id)
    const old = was.get(id)
    if (!wanted) return !old
    return old !== undefined && sameDesiredRow(old, wanted)
  })
}

function byRowId(desired: DesiredRows): Map<string, DesiredRow> {
  return new Map(desired.rows.map((row) => [rowId(row), row]))
}

function sameDesiredRow(a: DesiredRow, b: DesiredRow): boolean {
  if (a === b) return true
  const shape = (d: DesiredRow) => JSON.stringify([d.row, d.parent, d.links])
  return shape(a) === shape(b)
}

/** The group's NB generation as a cache shows it (`none` before its guard row exists). */
function generationOf(index: ActualIndex): string {
  const guard = index.byId.get(GUARD_ID)?.row
  if (!guard) return 'none'
  const ids = (guard as { external_ids?: Record<string, string> }).external_ids ?? {}
  return ids[GENERATION_KEY] ?? '0'
}

const NO_PORTS: PortChanges = { added: [], removed: [] }

export async function applyDesiredRows(
  client: OvsdbClient,
  desiredRows: DesiredRows | (() => Promise<DesiredRows>),
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  const maxAttempts = options.maxAttempts ?? 8
  let group = typeof desiredRows === 'function' ? '' : desiredRows.group
  const { cache } = options
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const sync = attempt > 1 || options.sync === true
    const before =
      cache && options.group !== undefined
        ? generationOf(await cache.ownedIndex(ownerOf(options.group), sync))
        : undefined
    const desired = typeof desiredRows === 'function' ? await desiredRows() : desiredRows
    group = desired.group
    const actual = cache
      ? await cache.ownedIndex(desired.owner, sync && before === undefined)
      : await readOwnedRows(client, desired.owner)
    if (before !== undefined && 'byId' in actual && generationOf(actual) !== before) {
      // NB changed while the desired rows were read: they may predate that change.
      await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt))
      continue
    }
    // With a cache: NB matched the compile this one follows at `last.mark`, so only what
    // changed since (in the compile or in NB) is compared. Taken with `actual` (no await
    // between), the mark describes the rows this diff reads.
    const changes = cache?.compiled.changes(desired)
    const last = cache?.applied.get(desired.owner)
    cache?.applied.delete(desired.owner)
    const mark = cache?.mark(desired.owner)
    const changed =
      last && attempt === 1 && last.compile === changes?.after
        ? cache?.changedSince(desired.owner, last.mark)
        : undefined
    const { guards, writes, bump, touched, compared, ports } = diffTopology(
      desired,
      actual,
      changes && changed ? { changes, changed } : undefined,
    )
    const matched = () => {
      if (cache && mark && changes) {
        cache.applied.set(desired.owner, { compile: changes.serial, mark })
      }
      cache?.written.set(desired.owner, desired)
    }
    if (writes.length === 0) {
      matched()
      return {
        changed: false,
        ops: 0,
        attempts: attempt,
        touched: [],
        drifted: [],
        compared,
        ports: NO_PORTS,
      }
    }
    const written = cache?.written.get(desired.owner)
    try {
      await client.transact(nb.name, [...guards, ...writes, ...bump])
      matched()
      // Drift is what reconcile reports; an attach's apply never asks for it.
      let drifted: string[] | undefined
      return {
        changed: true,
        ops: writes.length,
        attempts: attempt,
        touched,
        get drifted() {
          drifted ??= driftedRows(touched, desired, written)
          return drifted
        },
        compared,
        ports,
      }
    } catch (err) {
      if (!(err instanceof OvsdbTimedOut)) throw err
      await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt))
    }
  }
  throw new TopologyApplyContention(group, maxAttempts)
}

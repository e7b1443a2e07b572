/**
 * How lists are paged at the API edge, for HTTP (`?limit=`, `?continue=`, `{items,
 * continue?}`, as Kubernetes does) and gRPC (`page_size`, `page_token`,
 * `next_page_token`, as Google's AIP-158 does).
 *
 * A continue token is opaque to callers: base64url of `{"v":1,"k":<list>,"a":<last key>}`,
 * the last name (or address) of the previous page. The next page starts after it, so
 * it stays correct while objects come and go. It carries a position only, never a scope:
 * every page is read with the caller's own tenant scope, so a token — forged or another
 * caller's — shows nothing the caller could not list anyway.
 */
import { isIP } from 'node:net'
import * as v from 'valibot'
import { ValidationError } from '../app/index.ts'
import { Rfc1123Label } from '../lib/model/objects.ts'
import type { PageRequest } from '../lib/state/pages.ts'

/** A page's size when the caller names none. */
export const DEFAULT_PAGE_SIZE = 500
/** The largest page a caller may ask for. */
export const MAX_PAGE_SIZE = 1000

/** The lists that are paged; a token of one is refused by another. */
export type ListName = 'resource-groups' | 'managed-resources' | 'public-ips' | 'dpus'

/** What the last key of each list must look like (names, or an address). */
const KEY_OF: Readonly<Record<ListName, v.GenericSchema<string, string>>> = {
  'resource-groups': Rfc1123Label,
  'managed-resources': Rfc1123Label,
  dpus: Rfc1123Label,
  'public-ips': v.pipe(
    v.string(),
    v.check((s) => isIP(s) !== 0 && !s.includes('%')),
  ),
}

const TokenSchema = v.object({ v: v.literal(1), k: v.string(), a: v.string() })

/** The opaque token that continues `list` after `after`. */
export function encodeContinue(list: ListName, after: string): string {
  return Buffer.from(JSON.stringify({ v: 1, k: list, a: after })).toString('base64url')
}

/**
 * The key a token continues after, or a ValidationError naming `field` (`continue`,
 * `pageToken`) when it is not a token this API gave for `list`.
 */
export function decodeContinue(list: ListName, token: string, field: string): string {
  const refuse = (): never => {
    throw new ValidationError([
      { path: field, message: `is not a continue token of this list (${list}); start over` },
    ])
  }
  if (token.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(token)) refuse()
  let decoded: unknown
  try {
    decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'))
  } catch {
    refuse()
  }
  const parsed = v.safeParse(TokenSchema, decoded)
  if (!parsed.success || parsed.output.k !== list || !v.is(KEY_OF[list], parsed.output.a)) {
    return refuse()
  }
  return parsed.output.a
}

/** HTTP `?limit=`: absent → the default; else an integer from 1 to MAX_PAGE_SIZE, or 400. */
export function limitParam(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_PAGE_SIZE
  const n = Number(raw)
  if (!/^\d{1,7}$/.test(raw) || n < 1 || n > MAX_PAGE_SIZE) {
    throw new ValidationError([
      { path: 'limit', message: `must be an integer from 1 to ${MAX_PAGE_SIZE}` },
    ])
  }
  return n
}

/**
 * gRPC `page_size`, as AIP-158 has it: 0 (unset) → the default, above the maximum →
 * the maximum, negative → INVALID_ARGUMENT naming `pageSize`.
 */
export function pageSizeParam(size: number): number {
  if (!Number.isInteger(size) || size < 0) {
    throw new ValidationError([
      { path: 'pageSize', message: 'must be a non-negative integer (0: the default page size)' },
    ])
  }
  return size === 0 ? DEFAULT_PAGE_SIZE : Math.min(size, MAX_PAGE_SIZE)
}

/** The page a request asks for: its limit and, from its token (if any), where to start. */
export function pageRequest(
  list: ListName,
  limit: number,
  token: string | undefined,
  field: string,
): PageRequest {
  return token ? { limit, after: decodeContinue(list, token, field) } : { limit }
}

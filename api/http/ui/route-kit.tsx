/**
 * What every route of the admin UI shares: where it is mounted, what its handlers see of
 * the request (`Env`), how a page is answered, paged reads, the action form, and what the
 * composition (`routes.tsx`) hands each area of routes (`RouteKit`).
 */
import type { Context } from 'hono'
import type { Child } from 'hono/jsx'
import * as v from 'valibot'
import type { Operations } from '../../../app/index.ts'
import type { Page, PageRequest } from '../../../lib/state/pages.ts'
import type { errorHandler } from '../errors.ts'
import type { Frame } from './layout.tsx'
import type { Bounded } from './pages/overview.tsx'
import type { Session } from './session.ts'

/** Where the UI is mounted on the HTTP API. */
export const UI_PATH = '/ui'

/** Most objects of one kind a page reads (in pages); it says so when there are more. */
export const MAX_LISTED = 1000

/** What a UI handler sees of its request: the session and the flash message it took. */
export type Env = { Variables: { session: Session; flash: string | undefined } }

/** A page as the answer: `<!doctype html>` and the escaped markup. */
export async function page(
  c: Context,
  node: Child,
  status: 200 | 400 | 403 | 404 | 409 | 429 | 503 = 200,
) {
  return c.html(`<!doctype html>${await node}`, status)
}

/** The session's frame for a page, with the flash message its request took. */
export function frameOf(c: Context<Env>): Frame {
  const session = c.get('session')
  return { principal: session.principal, csrf: session.csrf, flash: c.get('flash') }
}

/** The form fields an action sends. */
export const ActionForm = v.object({
  csrf: v.pipe(v.string('is required'), v.maxLength(100, 'is too long')),
  confirm: v.pipe(v.string('is required'), v.maxLength(253, 'is too long')),
})

/** Reads up to MAX_LISTED items, a page at a time. */
export async function bounded<T>(
  read: (page: PageRequest) => Promise<Page<T>>,
  max = MAX_LISTED,
): Promise<Bounded<T>> {
  const items: T[] = []
  let after: string | undefined
  do {
    const limit = Math.min(500, max - items.length)
    const got = await read(after === undefined ? { limit } : { limit, after })
    items.push(...got.items)
    after = got.next
  } while (after !== undefined && items.length < max)
  return { items, more: after !== undefined }
}

/** What the composition hands each area of routes. */
export interface RouteKit {
  /** The operations of the request's principal. */
  readonly ops: (c: Context<Env>) => Operations
  /** Remembers a message for the next page, and goes there. */
  readonly done: (c: Context<Env>, flash: string, to: string) => Promise<Response>
  /** The API's one mapping from errors to statuses (as JSON). */
  readonly toJson: ReturnType<typeof errorHandler>
}

/**
 * The guards every UI request passes: security headers, same-origin POSTs, a bounded form
 * size, the session's CSRF token on every POST, and the operators-only pages.
 */
import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../errors.ts'
import { UI_CSP } from './assets.ts'
import { type Env, UI_PATH } from './route-kit.tsx'
import { csrfMatches } from './session.ts'

/** The largest form a POST may send (a token, a CSRF token, a name, a trace request). */
const MAX_FORM_BYTES = 16 * 1024

/** Security headers on every UI answer; pages are never cached. */
export const uiHeaders: MiddlewareHandler = async function uiHeaders(c, next) {
  await next()
  c.header('Content-Security-Policy', UI_CSP)
  c.header('X-Content-Type-Options', 'nosniff')
  c.header('X-Frame-Options', 'DENY')
  c.header('Referrer-Policy', 'same-origin')
  if (!c.req.path.startsWith(`${UI_PATH}/assets/`)) c.header('Cache-Control', 'no-store')
}

/**
 * Refuses a POST sent from another origin (a browser always says where from). `null` is
 * another origin too: browsers send it from sandboxed frames and after a cross-origin
 * redirect, as a page elsewhere could arrange to sign a visitor in to its own tenant.
 */
export const sameOriginPosts: MiddlewareHandler = async function sameOriginPosts(c, next) {
  const origin = c.req.header('origin')
  if (c.req.method === 'POST' && origin !== undefined) {
    let host: string | undefined
    try {
      host = origin === 'null' ? undefined : new URL(origin).host
    } catch {
      host = undefined
    }
    if (host !== c.req.header('host')) {
      throw new ApiError(403, 'FORBIDDEN', 'a form of this UI must be sent from this UI')
    }
  }
  await next()
}

/** Refuses (413) a form larger than MAX_FORM_BYTES. */
export const formLimit: MiddlewareHandler = bodyLimit({
  maxSize: MAX_FORM_BYTES,
  onError: () => {
    throw new ApiError(413, 'TOO_LARGE', `a form must not exceed ${MAX_FORM_BYTES} bytes`)
  },
})

/** Refuses (403) a POST that does not carry the session's CSRF token. */
export const csrfProtection: MiddlewareHandler<Env> = async function csrfProtection(c, next) {
  if (c.req.method === 'POST') {
    const body = await c.req.parseBody()
    const csrf = typeof body.csrf === 'string' ? body.csrf : ''
    if (!csrfMatches(c.get('session'), csrf)) {
      throw new ApiError(
        403,
        'FORBIDDEN',
        'this form has expired or was not sent from this session: go back, reload and try again',
        [{ path: 'csrf', message: 'does not match this session' }],
      )
    }
  }
  await next()
}

/** Refuses (403) a page only an operator may see. */
export const operatorOnly: MiddlewareHandler<Env> = async function operatorOnly(c, next) {
  if (c.get('session').principal.kind !== 'operator') {
    throw new ApiError(403, 'FORBIDDEN', 'only an operator may see this page')
  }
  await next()
}

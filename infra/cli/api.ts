/**
 * The CLI's view of Hydrazine's HTTP API (`/v1`): one request at a time with the token,
 * lists followed through every page, errors turned into `ApiError` with the API's code
 * and message.
 */
import { HydrazineError } from '../../lib/errors.ts'

/** The API answered with an error status, or could not be reached at all. */
export class ApiError extends HydrazineError {
  constructor(
    readonly status: number,
    code: string,
    message: string,
  ) {
    super(code, message)
  }
}

export interface ApiOptions {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  readonly url: string
  readonly token: string
  /** Per-request timeout (default 30 s). */
  readonly timeoutMs?: number
}

export interface Api {
  request(method: string, path: string, body?: unknown): Promise<unknown>
  /** Every item of a paged list (`?limit=` / `?continue=`), in the API's order. */
  listAll(path: string, query?: Readonly<Record<string, string | undefined>>): Promise<unknown[]>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

export function createApi({ url, token, timeoutMs = 30_000 }: ApiOptions): Api {
  const base = url.replace(/\/+$/, '')
  const request = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    let res: Response
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (error) {
      const reason = error instanceof Error ? (error.cause ?? error) : error
      throw new ApiError(
        0,
        'UNREACHABLE',
        `cannot reach ${base}: ${reason instanceof Error ? reason.message : String(reason)}`,
      )
    }
    const text = await res.text()
    let json: unknown
    try {
      json = text ? JSON.parse(text) : undefined
    } catch {
      json = undefined
    }
    if (res.ok) return json
    const error = isRecord(json) && isRecord(json.error) ? json.error : undefined
    const issues = Array.isArray(error?.issues)
      ? error.issues
          .filter(isRecord)
          .map((i) => `${String(i.path ?? '')}: ${String(i.message ?? '')}`)
      : []
    const message = [
      typeof error?.message === 'string' ? error.message : `${res.status} ${res.statusText}`,
      ...issues,
    ].join('\n  ')
    throw new ApiError(res.status, typeof error?.code === 'string' ? error.code : 'HTTP', message)
  }
  return {
    request,
    async listAll(path, query = {}) {
      const items: unknown[] = []
      let next: string | undefined
      do {
        const params = new URLSearchParams()
        for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, v)
        if (next) params.set('continue', next)
        const qs = params.toString()
        const page = await request('GET', `${path}${qs ? `?${qs}` : ''}`)
        if (!isRecord(page) || !Array.isArray(page.items)) {
          throw new ApiError(0, 'BAD_ANSWER', `GET ${path}: no items in the answer`)
        }
        items.push(...page.items)
        next = typeof page.continue === 'string' && page.continue ? page.continue : undefined
      } while (next)
      return items
    },
  }
}

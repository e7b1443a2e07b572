/**
 * Requests to an HTTP app (hono's `app.request`, no socket) as tests make them: a method,
 * a path, an optional JSON body and a bearer token; the status and the parsed body back.
 */

/** What a test reads of an answer. */
export interface JsonAnswer {
  readonly status: number
  // biome-ignore lint/suspicious/noExplicitAny: answers are inspected loosely in tests
  readonly json: any
}

/** The app as tests hold it: anything with hono's `request`. */
export interface RequestApp {
  request(path: string, init: RequestInit): Response | Promise<Response>
}

/**
 * @example
 * const call = jsonCaller(createApp({ … }), OPERATOR)
 * const { status, json } = await call('PUT', '/v1/resource-groups/g', spec)
 */
export function jsonCaller(app: RequestApp, defaultToken?: string) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    token: string | undefined = defaultToken,
  ): Promise<JsonAnswer> => {
    const res = await app.request(path, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    return { status: res.status, json: text ? JSON.parse(text) : undefined }
  }
}

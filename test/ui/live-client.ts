/**
 * The admin UI over plain HTTP, as the tests of its live stream use it: signing in with a
 * token (the session's cookie and CSRF token), signing out, and `GET /ui/events` read as a
 * browser's EventSource reads it, every `change` event kept in order.
 */
import type { LiveEvent } from '../../api/http/ui/live.ts'
import type { Teardown } from '../helpers/stack.ts'

/** A signed-in browser: its session cookie and the CSRF token its forms carry. */
export interface UiSession {
  readonly cookie: string
  readonly csrf: string
}

/** Signs in with `token` on the UI at `base`. */
export async function signIn(base: string, token: string): Promise<UiSession> {
  const res = await fetch(`${base}/ui/sign-in`, {
    method: 'POST',
    body: new URLSearchParams({ token }),
    redirect: 'manual',
  })
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  const page = await (await fetch(`${base}/ui/`, { headers: { cookie } })).text()
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? ''
  if (!cookie || !csrf) throw new Error(`signing in on ${base} answered ${res.status}`)
  return { cookie, csrf }
}

/** Signs the session out (its sign-out form); resolves to the answer's status. */
export async function signOut(base: string, session: UiSession): Promise<number> {
  const res = await fetch(`${base}/ui/sign-out`, {
    method: 'POST',
    headers: { cookie: session.cookie },
    body: new URLSearchParams({ csrf: session.csrf }),
    redirect: 'manual',
  })
  return res.status
}

/** One `GET /ui/events`, read until the server ends it (or the test does). */
export interface LiveStream {
  /** The answer's status: 200 for a stream. */
  readonly status: number
  /** Every `change` event heard so far, in order. */
  readonly events: LiveEvent[]
  /** Settles when the answer's body ends. */
  readonly ended: Promise<void>
  /** True once the server has ended the stream. */
  endedByServer(): boolean
  /** The names of the objects its events told of, each once. */
  names(): string[]
}

/** Opens the live stream of `session`, watching `watch` (`group/g`, `host/h`, `dpu/d`). */
export async function openStream(
  t: Teardown,
  base: string,
  session: UiSession,
  watch: readonly string[] = [],
): Promise<LiveStream> {
  const abort = new AbortController()
  t.teardown(() => abort.abort())
  const query = watch.map((key) => `watch=${encodeURIComponent(key)}`).join('&')
  const res = await fetch(`${base}/ui/events${query ? `?${query}` : ''}`, {
    headers: { cookie: session.cookie, accept: 'text/event-stream' },
    signal: abort.signal,
  })
  const events: LiveEvent[] = []
  let byServer = false
  const read = async () => {
    if (!res.body) return
    const decoder = new TextDecoder()
    let buffered = ''
    for await (const chunk of res.body) {
      buffered += decoder.decode(chunk, { stream: true })
      for (let cut = buffered.indexOf('\n\n'); cut >= 0; cut = buffered.indexOf('\n\n')) {
        const lines = buffered.slice(0, cut).split('\n')
        buffered = buffered.slice(cut + 2)
        const data = lines.find((l) => l.startsWith('data: '))
        if (lines.includes('event: change') && data) events.push(JSON.parse(data.slice(6)))
      }
    }
    byServer = true
  }
  const ended = read().catch(() => {})
  return {
    status: res.status,
    events,
    ended,
    endedByServer: () => byServer,
    names: () => [...new Set(events.map((e) => `${e.kind}/${e.name}`))],
  }
}

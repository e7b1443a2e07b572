/**
 * The frame of every admin UI page — skip link, header with the main navigation and
 * sign-out, the flash message of the last action, an `aria-live` region the client script
 * announces live changes in — and the small parts pages share (phase badges, times,
 * events and conditions tables). Everything is escaped by hono's JSX; nothing inline.
 */
import type { Child } from 'hono/jsx'
import type { ObjectEvent } from '../../../lib/model/events.ts'
import type { Condition } from '../../../lib/model/objects.ts'
import type { Principal } from '../tokens.ts'

/** What the frame needs to know of the signed-in session (absent: signed out). */
export interface Frame {
  readonly principal: Principal
  readonly csrf: string
  readonly flash?: string | undefined
}

/** The main navigation: which entry the page is. */
export type NavEntry = 'overview' | 'dpus' | 'public-ips' | 'none'

const NAV: readonly { entry: NavEntry; href: string; label: string; operatorOnly: boolean }[] = [
  { entry: 'overview', href: '/ui/', label: 'Overview', operatorOnly: false },
  { entry: 'dpus', href: '/ui/dpus', label: 'DPUs', operatorOnly: true },
  { entry: 'public-ips', href: '/ui/public-ips', label: 'Public IPs', operatorOnly: true },
]

export function whoIs(principal: Principal): string {
  return principal.kind === 'operator' ? 'operator' : `tenant ${principal.tenant}`
}

export function Layout(props: {
  title: string
  frame?: Frame | undefined
  nav?: NavEntry
  /** `data-page` on the body (the client script reads it). */
  page: string
  /** Live updates on: the page's `data-object` elements follow `/ui/events`. */
  live?: boolean
  /**
   * Where a live refresh fetches the page's `[data-refresh]` sections again (default: the
   * page's own address). A page whose address does something (a trace) names the plain
   * page, so that a refresh only reads.
   */
  refreshFrom?: string
  children?: Child
}) {
  const { frame } = props
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Hydrazine`}</title>
        <link rel="stylesheet" href="/ui/assets/app.css" />
        <link rel="icon" href="/ui/assets/icon.svg" type="image/svg+xml" />
        <script src="/ui/assets/app.js" defer />
      </head>
      <body
        data-page={props.page}
        data-live={props.live && frame ? 'on' : 'off'}
        {...(props.refreshFrom ? { 'data-refresh-from': props.refreshFrom } : {})}
      >
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href="/ui/">
            Hydrazine
          </a>
          {frame ? (
            <nav aria-label="Main">
              <ul>
                {NAV.filter((n) => !n.operatorOnly || frame.principal.kind === 'operator').map(
                  (n) => (
                    <li>
                      <a
                        href={n.href}
                        {...(props.nav === n.entry ? { 'aria-current': 'page' } : {})}
                      >
                        {n.label}
                      </a>
                    </li>
                  ),
                )}
              </ul>
            </nav>
          ) : null}
          {frame ? (
            <div class="who">
              <span>{`Signed in as ${whoIs(frame.principal)}`}</span>
              <form class="inline" method="post" action="/ui/sign-out">
                <input type="hidden" name="csrf" value={frame.csrf} />
                <button type="submit">Sign out</button>
              </form>
            </div>
          ) : null}
        </header>
        <main id="main" tabindex={-1}>
          {frame?.flash ? (
            <p class="flash" role="status">
              {frame.flash}
            </p>
          ) : null}
          {props.children}
          <p id="live-stale" class="notice" hidden>
            {'Objects were added or removed since this overview was loaded: '}
            <a href="/ui/">reload</a>
            {' to see them.'}
          </p>
        </main>
        <div id="live-region" class="sr-only" aria-live="polite" />
        <footer>Hydrazine admin UI</footer>
      </body>
    </html>
  )
}

/** A phase (or DPU state) as a word on a coloured badge, following live updates. */
export function Phase(props: { phase: string; object?: string }) {
  return (
    <span
      class="badge"
      data-phase={props.phase}
      {...(props.object ? { 'data-object': props.object } : {})}
    >
      {props.phase}
    </span>
  )
}

/** A time, machine-readable, shown in UTC to the second. */
export function Time(props: { at: string | undefined }) {
  if (!props.at) return <span>never</span>
  const shown = props.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')
  return <time datetime={props.at}>{shown}</time>
}

export function EventsTable(props: { events: readonly ObjectEvent[]; label: string }) {
  if (props.events.length === 0) return <p>No events recorded.</p>
  return (
    <table>
      <caption class="sr-only">{props.label}</caption>
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Type</th>
          <th scope="col">Reason</th>
          <th scope="col">Message</th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((e) => (
          <tr>
            <td>
              <Time at={e.at} />
            </td>
            <td>{e.type}</td>
            <td>{e.reason}</td>
            <td>{e.message}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function ConditionsTable(props: { conditions: readonly Condition[] }) {
  if (props.conditions.length === 0) return <p>No conditions.</p>
  return (
    <table>
      <caption class="sr-only">Conditions</caption>
      <thead>
        <tr>
          <th scope="col">Type</th>
          <th scope="col">Status</th>
          <th scope="col">Reason</th>
          <th scope="col">Message</th>
          <th scope="col">Since</th>
        </tr>
      </thead>
      <tbody>
        {props.conditions.map((c) => (
          <tr>
            <th scope="row">{c.type}</th>
            <td>{c.status}</td>
            <td>{c.reason}</td>
            <td>{c.message}</td>
            <td>
              <Time at={c.lastTransitionTime} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

/** Facts as a definition list: `[label, value]` pairs, empty values left out. */
export function Facts(props: { facts: readonly (readonly [string, Child])[] }) {
  return (
    <dl class="facts">
      {props.facts
        .filter(([, value]) => value !== undefined && value !== null && value !== '')
        .map(([label, value]) => [<dt>{label}</dt>, <dd>{value}</dd>])}
    </dl>
  )
}

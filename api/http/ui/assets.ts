/**
 * The admin UI's only static files, served from memory under `/ui/assets/`: its style
 * sheet, its small client script (live updates, no framework) and its icon. Every UI
 * answer carries `UI_CSP`: nothing inline, nothing from elsewhere — so the pages hold no
 * `<script>` or `style=` of their own, and SVG colours come from classes and attributes.
 */

/** The Content-Security-Policy of every UI answer. */
export const UI_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

/**
 * Colours by phase or DPU state, always beside the word itself (never colour alone):
 * Ready/Online green, converging/Stale amber, Failed/Lost red, Terminating and the like grey.
 */
const OK = '[data-phase="Ready"], [data-phase="Online"], [data-phase="Free"]'
const BUSY =
  '[data-phase="Provisioning"], [data-phase="Configuring"], [data-phase="Attaching"], [data-phase="Detaching"], [data-phase="Stale"]'
const BAD = '[data-phase="Failed"], [data-phase="Lost"]'

const scoped = (selectors: string, suffix: string) =>
  selectors
    .split(', ')
    .map((s) => `${s}${suffix}`)
    .join(', ')

export const STYLE_CSS = `
:root { color-scheme: light; --fg: #1f2937; --muted: #4b5563; --line: #d1d5db; --bg: #f9fafb;
  --accent: #1d4ed8; --focus: #f59e0b; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); font-size: 15px; line-height: 1.45; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: 8px; top: -48px; background: #fff; padding: 8px 12px; z-index: 10;
  border: 2px solid var(--accent); }
.skip:focus { top: 8px; }
header.top { display: flex; align-items: center; gap: 24px; padding: 0 24px; background: #111827; color: #f9fafb; min-height: 52px; }
header.top .brand { font-weight: 700; letter-spacing: .02em; color: #f9fafb; text-decoration: none; }
header.top nav ul { display: flex; gap: 4px; list-style: none; margin: 0; padding: 0; }
header.top nav a { color: #e5e7eb; text-decoration: none; padding: 6px 10px; border-radius: 4px; display: inline-block; }
header.top nav a[aria-current="page"], header.top nav a:hover { background: #374151; color: #fff; }
header.top .who { margin-left: auto; display: flex; align-items: center; gap: 12px; color: #d1d5db; }
header.top .who button { background: transparent; color: #f9fafb; border: 1px solid #6b7280; }
main { padding: 20px 24px 48px; max-width: 1400px; }
h1 { font-size: 1.5rem; margin: 0 0 12px; }
h2 { font-size: 1.15rem; margin: 28px 0 8px; }
h3 { font-size: 1rem; margin: 16px 0 6px; }
p.lead { color: var(--muted); margin-top: 0; }
table { border-collapse: collapse; background: #fff; width: 100%; margin: 4px 0 12px; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
tbody th { background: transparent; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9em; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: .85em; font-weight: 600;
  background: #e5e7eb; color: #374151; border: 1px solid #9ca3af; }
${scoped(OK, '.badge')} { background: #dcfce7; color: #14532d; border-color: #16a34a; }
${scoped(BUSY, '.badge')} { background: #fef3c7; color: #78350f; border-color: #d97706; }
${scoped(BAD, '.badge')} { background: #fee2e2; color: #7f1d1d; border-color: #dc2626; }
.cards { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 12px; margin: 8px 0 16px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
.card h2 { margin: 0 0 4px; font-size: 1rem; }
.card .big { font-size: 1.6rem; font-weight: 700; }
.card .attention { color: #7f1d1d; font-weight: 600; }
.flash { background: #eff6ff; border: 1px solid #93c5fd; padding: 8px 12px; border-radius: 4px; }
.error { background: #fef2f2; border: 1px solid #fca5a5; padding: 8px 12px; border-radius: 4px; }
.notice { background: #fffbeb; border: 1px solid #fcd34d; padding: 8px 12px; border-radius: 4px; }
form.inline { display: inline; }
button, .button { font: inherit; padding: 6px 14px; border-radius: 4px; border: 1px solid #6b7280; background: #fff;
  color: var(--fg); cursor: pointer; text-decoration: none; display: inline-block; }
button.danger, .button.danger { background: #b91c1c; border-color: #7f1d1d; color: #fff; }
button.primary { background: var(--accent); border-color: #1e3a8a; color: #fff; }
.actions { display: flex; gap: 8px; flex-wrap: wrap; margin: 8px 0; }
label { font-weight: 600; display: block; margin: 8px 0 4px; }
input, select { font: inherit; padding: 5px 8px; border: 1px solid #6b7280; border-radius: 4px; background: #fff; }
.field-row { display: flex; gap: 16px; align-items: flex-end; flex-wrap: wrap; }
.signin { max-width: 420px; margin: 60px auto; background: #fff; border: 1px solid var(--line); padding: 24px; border-radius: 8px; }
.signin input { width: 100%; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; background: #fff;
  border: 1px solid var(--line); padding: 10px 14px; margin: 4px 0 12px; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; }
.two { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 24px; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
figure.topology { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto; }
figure.topology svg { display: block; margin: 0 auto; max-width: 100%; height: auto; }
svg text { font-family: system-ui, sans-serif; font-size: 12px; fill: #111827; }
svg text.name { font-weight: 600; }
svg text.small { font-size: 11px; fill: #374151; }
svg .link { stroke: #6b7280; stroke-width: 1.5; fill: none; }
svg .dpu-band { fill: #f3f4f6; stroke: #9ca3af; stroke-dasharray: 4 3; }
svg .node { fill: #f3f4f6; stroke: #6b7280; stroke-width: 1.5; }
${scoped(OK, ' > .node')} { fill: #dcfce7; stroke: #15803d; }
${scoped(BUSY, ' > .node')} { fill: #fef3c7; stroke: #b45309; }
${scoped(BAD, ' > .node')} { fill: #fee2e2; stroke: #b91c1c; }
.ipam-grid { list-style: none; margin: 4px 0 12px; display: flex; flex-wrap: wrap; gap: 2px; max-width: 100%; background: #fff; padding: 6px; border: 1px solid var(--line); }
.cell { width: 14px; height: 14px; border: 1px solid #9ca3af; display: inline-block; }
.ipam-grid .cell.wide { width: auto; min-width: 14px; padding: 0 4px; font-size: 10px; line-height: 12px; }
.cell.used { background: #2563eb; border-color: #1e3a8a; }
.cell.reserved { background: #6b7280; border-color: #374151; }
.cell.free { background: #fff; }
.cell.outside { background: repeating-linear-gradient(45deg, #e5e7eb, #e5e7eb 3px, #fff 3px, #fff 6px); }
.legend { display: flex; gap: 16px; flex-wrap: wrap; margin: 6px 0; color: var(--muted); }
.legend .cell { vertical-align: middle; margin-right: 4px; }
pre { background: #111827; color: #f9fafb; padding: 10px; overflow-x: auto; border-radius: 4px; }
footer { color: var(--muted); padding: 0 24px 24px; font-size: .85em; }
`

/**
 * The client script: follows `/ui/events` (server-sent events) and updates, without a
 * reload, every element marked `data-object="<kind>/<name>"` (its `data-phase`, and the
 * text of its `.phase-text` or of a `.badge`), the overview's counts, a detail page's
 * `[data-refresh]` sections (fetched again), and announces each change in the page's
 * `aria-live` region.
 */
export const CLIENT_JS = `
(function () {
  'use strict'
  var body = document.body
  if (!body || body.getAttribute('data-live') !== 'on' || !window.EventSource) return
  var live = document.getElementById('live-region')
  var stale = document.getElementById('live-stale')
  var say = function (text) { if (live) live.textContent = text }
  var recount = function () {
    var counters = document.querySelectorAll('[data-count]')
    for (var i = 0; i < counters.length; i++) {
      var el = counters[i]
      var parts = el.getAttribute('data-count').split(':')
      var rows = document.querySelectorAll('tr[data-kind="' + parts[0] + '"]')
      var n = 0
      for (var j = 0; j < rows.length; j++) {
        var phase = rows[j].getAttribute('data-phase')
        if (phase === 'Gone') continue
        if (parts[1] === 'all' || (parts[1] === 'attention' && phase !== 'Ready' && phase !== 'Online')) n++
      }
      el.textContent = String(n)
    }
  }
  // An object of a detail page changed: its [data-refresh] sections (status, conditions,
  // events, the picture) are fetched again and swapped in — no reload: the focus and the
  // forms stay as they are. From data-refresh-from when the page names it (a trace's page
  // names its host's: a refresh must not trace again).
  var refreshing = null
  var refreshFrom = body.getAttribute('data-refresh-from') || window.location.href
  var refresh = function () {
    if (refreshing) return
    refreshing = setTimeout(function () {
      refreshing = null
      fetch(refreshFrom, { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.text() : '' })
        .then(function (text) {
          if (!text) return
          var fresh = new DOMParser().parseFromString(text, 'text/html')
          var parts = document.querySelectorAll('[data-refresh]')
          for (var i = 0; i < parts.length; i++) {
            var next = fresh.getElementById(parts[i].id)
            if (next) parts[i].innerHTML = next.innerHTML
          }
        })
        .catch(function () {})
    }, 300)
  }
  // The objects this page shows: the stream sends their state now, then every change.
  var keys = []
  var marked = document.querySelectorAll('[data-object]')
  for (var k = 0; k < marked.length && keys.length < 200; k++) {
    var key = marked[k].getAttribute('data-object')
    if (keys.indexOf(key) < 0) keys.push(key)
  }
  var query = keys.map(function (key) { return 'watch=' + encodeURIComponent(key) }).join('&')
  var source = new EventSource('/ui/events' + (query ? '?' + query : ''))
  source.addEventListener('open', function () { body.setAttribute('data-live-state', 'open') })
  source.addEventListener('change', function (message) {
    var change
    try { change = JSON.parse(message.data) } catch (e) { return }
    var key = change.kind + '/' + change.name
    var shown = document.querySelectorAll('[data-object="' + CSS.escape(key) + '"]')
    var phase = change.gone ? 'Gone' : change.phase
    var text = change.gone ? 'Deleted' : change.phase
    if (shown.length === 0) {
      if (stale && body.getAttribute('data-page') === 'overview') stale.hidden = false
      return
    }
    var changed = false
    for (var i = 0; i < shown.length; i++) {
      var el = shown[i]
      if (!phase || el.getAttribute('data-phase') === phase) continue
      changed = true
      el.setAttribute('data-phase', phase)
      if (el.classList.contains('badge')) el.textContent = text
      var texts = el.querySelectorAll('.phase-text')
      for (var j = 0; j < texts.length; j++) texts[j].textContent = text
    }
    if (changed && document.querySelector('[data-refresh]')) refresh()
    if (changed) {
      recount()
      say(change.kind + ' ' + change.name + ' is now ' + text)
    }
  })
})()
`

/** The UI's icon (a favicon the browser asks for on every page). */
export const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d4ed8"/><path d="M4 3v10M12 3v10M4 8h8" stroke="#fff" stroke-width="2"/></svg>'

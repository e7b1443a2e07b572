/**
 * What the admin UI tests drive: a real HTTP server (`@hono/node-server` on 127.0.0.1, a
 * free port) serving `createApp` with the UI on, and Debian's headless `chromium` through
 * `playwright-core` (nothing downloaded). Each page a test opens records its console
 * errors and uncaught exceptions; each screenshot goes to `.tap/ui-screenshots/`.
 */
import { mkdir } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { type ApiDeps, createApp } from '../../api/http/app.ts'
import type { Teardown } from '../helpers/stack.ts'

/** Where the system's chromium is (`infra/debian-packages-test.txt`). */
export const CHROMIUM = '/usr/bin/chromium'

export const SCREENSHOTS = '.tap/ui-screenshots'

/** The viewport the UI must be readable at. */
export const VIEWPORT = { width: 1280, height: 800 } as const

/**
 * Serves the API (and UI) on 127.0.0.1; resolves to its base URL. Closed at teardown, or
 * its UI earlier by aborting `closing` (as Hydrazine does before closing its server).
 */
export async function serveApp(
  t: Teardown,
  deps: ApiDeps,
  closing = new AbortController(),
): Promise<string> {
  const app = createApp(deps.ui ? { ...deps, ui: { ...deps.ui, closing: closing.signal } } : deps)
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 })
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  t.teardown(async () => {
    closing.abort()
    await new Promise<void>((resolve) => {
      server.close(() => resolve())
      if ('closeAllConnections' in server) server.closeAllConnections()
    })
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** The headless browser, closed at teardown (before the server: teardowns run LIFO). */
export async function startBrowser(t: Teardown): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  })
  t.teardown(() => browser.close())
  await mkdir(SCREENSHOTS, { recursive: true })
  return browser
}

/** A console error or uncaught exception a page showed. */
export interface PageProblem {
  readonly url: string
  readonly text: string
}

/** A page that records its console errors and uncaught exceptions in `problems`. */
export async function watchedPage(context: BrowserContext, problems: PageProblem[]): Promise<Page> {
  const page = await context.newPage()
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push({ url: page.url(), text: message.text() })
  })
  page.on('pageerror', (error) => problems.push({ url: page.url(), text: String(error) }))
  return page
}

/** A full-page screenshot at the test viewport, named for the page shown. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = `${SCREENSHOTS}/${name}.png`
  await page.screenshot({ path, fullPage: true })
  return path
}

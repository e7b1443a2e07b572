/**
 * The admin web UI in a real browser — Debian's headless chromium — against a
 * running controller with real Redis, OVN and FRR and stand-in DPU agents: signing in,
 * the overview, a group's topology picture and address map, a host turning Ready without
 * a reload, actions with their confirmation (force-delete, re-drive, reconcile now), a
 * tenant seeing only its own tenant, keyboard navigation, and no console errors on any
 * page. Each page is saved as a screenshot in `.tap/ui-screenshots/`.
 */

import type { Page, Request } from 'playwright-core'
import t from 'tap'
import { RedisSessions } from '../../api/http/ui/session.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { OPERATOR, TENANT_A, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'
import { startPipelineFrr } from '../pipeline/scenarios.ts'
import { heartbeat } from '../pipeline/stand-in-agent.ts'
import {
  type PageProblem,
  screenshot,
  serveApp,
  startBrowser,
  VIEWPORT,
  watchedPage,
} from './browser.ts'

const readyHost = (p: Pipeline, name: string) =>
  until(
    () => p.controller.store.hosts.get(name),
    (h) => h?.status.phase === 'Ready',
    30_000,
  )

/** Signs `page` in with `token` from the sign-in page; resolves once on the overview. */
async function signIn(page: Page, base: string, token: string): Promise<void> {
  await page.goto(`${base}/ui/`)
  await page.getByLabel('API token').fill(token)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${base}/ui/`)
}

/** Waits until the phase badge of `object` says `phase`, the page left as it is. */
const becomes = (page: Page, object: string, phase: string) =>
  page
    .locator(`.badge[data-object="${object}"]`, { hasText: new RegExp(`^${phase}$`) })
    .first()
    .waitFor({ timeout: 30_000 })

/** The text of the phase badge of `object` (`host/h1`), the first on the page. */
const badge = (page: Page, object: string) =>
  page.locator(`.badge[data-object="${object}"]`).first()

t.test('the admin UI, in a browser, on a running system', async (t) => {
  const p = await startPipeline(t, { frr: true })
  await startPipelineFrr(t, p)
  // Agents that heartbeat, as the real one does: their DPUs are Online.
  const beating = { protocolVersions: ['1.0', '2.0'] }
  await p.agent('dpu-1', beating)
  await p.agent('dpu-2', beating)
  await p.client.registerPublicIp('203.0.113.7')
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  await p.client.applyGroup('group-b', groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1'))
  await p.client.applyHost(
    'host-a1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'PublicAccess' }),
  )
  await p.client.applyHost(
    'host-a2',
    hostSpec('group-a', 'dpu-2', 2, { hostAccess: 'FabricAccess' }),
  )
  await p.client.applyHost('host-a3', hostSpec('group-a', 'dpu-1', 3))
  // group-b's DPU has no agent: its host stays converging.
  await p.client.applyHost('host-b1', hostSpec('group-b', 'dpu-3', 4))
  for (const h of ['host-a1', 'host-a2', 'host-a3']) await readyHost(p, h)

  // Two replicas of the UI, as Hydrazine runs them: sessions in the one Redis.
  const replica = () =>
    serveApp(t, {
      readiness: {},
      v1: { client: p.client, tokens: TEST_TOKENS },
      ui: {
        client: p.client,
        tokens: TEST_TOKENS,
        sessions: new RedisSessions(p.controller.redis),
        liveLimits: { dpuRefreshMs: 500 },
      },
    })
  const base = await replica()
  const other = await replica()
  const browser = await startBrowser(t)
  const problems: PageProblem[] = []
  const operator = await browser.newContext({ viewport: VIEWPORT })
  const page = await watchedPage(operator, problems)

  /** Runs a step whose pages answer `status` on purpose: only that error is allowed. */
  const expectingStatus = async (status: number, step: () => Promise<void>) => {
    const before = problems.length
    await step()
    const added = problems.splice(before)
    t.same(
      added.filter((e) => !e.text.includes(`status of ${status}`)),
      [],
      `no console error but the expected ${status}`,
    )
  }

  await t.test('sign-in: a wrong token is refused, the operator token signs in', async (t) => {
    await page.goto(`${base}/ui/groups/group-a`)
    t.match(page.url(), /\/ui\/sign-in$/, 'signed out, a page sends you to sign in')
    await screenshot(page, '01-sign-in')
    await expectingStatus(403, async () => {
      await page.getByLabel('API token').fill('not-a-token-of-this-system')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForSelector('#sign-in-error')
    })
    t.match(await page.locator('#sign-in-error').textContent(), /not known/)
    await screenshot(page, '02-sign-in-refused')
    t.notOk(page.url().includes('token'), 'the token is never in a URL')

    await signIn(page, base, OPERATOR)
    const cookies = await operator.cookies()
    t.equal(cookies.length, 1, 'one cookie: the session')
    t.match(cookies[0], { httpOnly: true, sameSite: 'Strict', path: '/ui' })
    t.not(cookies[0]?.value, OPERATOR, 'the cookie is not the token')
    // Cookies are per host, not per port: the same browser, balanced to another replica.
    await page.goto(`${other}/ui/`)
    t.match(page.url(), /\/ui\/$/, 'the other replica knows the session: no sign-in asked')
    t.equal(await page.locator('h1').textContent(), 'Overview')
  })

  await t.test('the overview lists the groups, hosts not Ready first', async (t) => {
    await page.goto(`${base}/ui/`)
    const groups = await page.locator('tr[data-kind="group"] th a').allTextContents()
    t.same(groups.sort(), ['group-a', 'group-b'])
    const hosts = await page.locator('tr[data-kind="host"] th a').allTextContents()
    t.equal(hosts[0], 'host-b1', 'the host that is not Ready comes first')
    t.same(hosts.slice(1).sort(), ['host-a1', 'host-a2', 'host-a3'])
    t.equal(await page.locator('[data-count="host:attention"]').textContent(), '1')
    t.equal(await badge(page, 'group/group-a').textContent(), 'Ready')
    await screenshot(page, '03-overview')
  })

  await t.test('keyboard: Tab reaches the skip link, then the main navigation', async (t) => {
    await page.goto(`${base}/ui/`)
    await page.keyboard.press('Tab')
    t.equal(await page.locator(':focus').textContent(), 'Skip to content')
    await screenshot(page, '04-skip-link-focused')
    const reached: string[] = []
    for (let i = 0; i < 6; i++) {
      await page.keyboard.press('Tab')
      reached.push((await page.locator(':focus').textContent()) ?? '')
    }
    t.match(reached, ['Hydrazine', 'Overview', 'DPUs', 'Public IPs'], 'then the brand and the nav')
    await page.goto(`${base}/ui/`)
    await page.keyboard.press('Tab')
    await page.keyboard.press('Enter')
    t.equal(
      await page.locator(':focus').getAttribute('id'),
      'main',
      'the skip link moves the focus to the content',
    )
  })

  await t.test("a group's page: one gateway router per DPU in use, and its map", async (t) => {
    await page.goto(`${base}/ui/groups/group-a`)
    const gateways = page.locator('svg [data-kind="gateway-router"]')
    t.equal(await gateways.count(), 2, 'hosts on dpu-1 and dpu-2: two gateway routers')
    t.same(
      (await gateways.evaluateAll((els) => els.map((e) => e.getAttribute('data-dpu')))).sort(),
      ['dpu-1', 'dpu-2'],
    )
    t.equal(await page.locator('svg [data-kind="router"]').count(), 1, 'one router')
    t.equal(await page.locator('svg [data-kind="switch"]').count(), 1, 'one switch')
    t.same(
      (
        await page
          .locator('svg [data-kind="host"]')
          .evaluateAll((els) =>
            els.map((e) => `${e.getAttribute('data-dpu')}/${e.getAttribute('data-host')}`),
          )
      ).sort(),
      ['dpu-1/host-a1', 'dpu-1/host-a3', 'dpu-2/host-a2'],
      'each host under its DPU',
    )
    t.match(
      await page.locator('#topology-gw-dpu-1').textContent(),
      /hz\/group-a\/dpu\/dpu-1\/gw.*203\.0\.113\.7/s,
      "the gateway router's OVN name and the public IP it NATs",
    )
    t.equal(
      await page.locator('#topology-gw-dpu-1 title').count(),
      1,
      'each node has a title for assistive technology',
    )
    t.equal(await page.locator('.ipam-grid li.used').count(), 3, 'three used addresses')
    t.ok((await page.locator('.ipam-grid li.reserved').count()) >= 3, 'reserved addresses')
    t.match(
      await page.locator('.ipam-grid li.used').first().getAttribute('title'),
      /used by host-a/,
    )
    await screenshot(page, '05-group')
  })

  await t.test('a host turning Ready shows without a reload', async (t) => {
    await p.client.applyHost('host-a4', hostSpec('group-a', 'dpu-4', 5))
    await page.goto(`${base}/ui/hosts/host-a4`)
    await page.waitForSelector('body[data-live-state="open"]')
    t.not(await badge(page, 'host/host-a4').textContent(), 'Ready', 'its DPU has no agent yet')
    await screenshot(page, '06-host-converging')
    // A mark that a reload would wipe out.
    await page.evaluate("document.body.setAttribute('data-not-reloaded', 'yes')")
    await p.agent('dpu-4')
    await becomes(page, 'host/host-a4', 'Ready')
    t.equal(
      await page.locator('body').getAttribute('data-not-reloaded'),
      'yes',
      'the same page, not reloaded',
    )
    await page
      .locator('#host-status', { hasText: 'Configs synced' })
      .getByText('yes')
      .first()
      .waitFor()
    t.match(
      await page.locator('#host-status').textContent(),
      /Host IP\s*10\.10\.10\.\d+/,
      'its status section followed too',
    )
    t.match(await page.locator('#live-region').textContent(), /host host-a4 is now Ready/)
    await screenshot(page, '07-host-ready')
  })

  await t.test('the trace form answers with a verdict', async (t) => {
    await page.goto(`${base}/ui/hosts/host-a3`)
    await page.getByLabel('To (host or address)').fill('host-a2')
    await page.getByRole('button', { name: 'Trace' }).click()
    await page.waitForSelector('[data-verdict]')
    t.equal(await page.locator('[data-verdict]').getAttribute('data-verdict'), 'delivered')
    await screenshot(page, '08-host-trace')
    await expectingStatus(400, async () => {
      await page.getByLabel('Port (tcp, udp)').fill('http')
      await page.getByRole('button', { name: 'Trace' }).click()
      await page.waitForSelector('#trace-result.error')
    })
    t.match(await page.locator('#trace-result').textContent(), /port/, 'the bad field is named')
  })

  await t.test('the trace form refuses what GET /v1/trace refuses, in its words', async (t) => {
    const cases: [string, { to: string; proto: string; port: string }][] = [
      ['no destination', { to: '', proto: 'icmp', port: '' }],
      ['a port that is not a number', { to: 'host-a2', proto: 'tcp', port: 'http' }],
      ['a port out of range', { to: 'host-a2', proto: 'udp', port: '70000' }],
      ['a port with icmp', { to: 'host-a2', proto: 'icmp', port: '22' }],
      ['an unknown protocol', { to: 'host-a2', proto: 'sctp', port: '' }],
    ]
    for (const [name, form] of cases) {
      const ui = await operator.request.get(
        `${base}/ui/hosts/host-a3/trace?${new URLSearchParams(form)}`,
      )
      const shown = /id="trace-result">([^<]*)</.exec(await ui.text())?.[1]
      const api = await operator.request.get(
        `${base}/v1/trace?${new URLSearchParams({
          from: 'host-a3',
          to: form.to,
          proto: form.proto,
          ...(form.port ? { port: form.port } : {}),
        })}`,
        { headers: { authorization: `Bearer ${OPERATOR}` } },
      )
      const { error } = (await api.json()) as {
        error: { issues: { path: string; message: string }[] }
      }
      const said = error.issues.map((i) => `${i.path}: ${i.message}`).join('; ')
      t.same([ui.status(), shown], [api.status(), `Not traced: ${said}`], name)
    }
  })

  await t.test('DPUs, one DPU and the public IP pool', async (t) => {
    await page.goto(`${base}/ui/dpus`)
    const ids = await page.locator('tr[data-kind="dpu"] th a').allTextContents()
    t.same(ids.sort(), ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4'])
    await screenshot(page, '09-dpus')
    await page.goto(`${base}/ui/dpus/dpu-1`)
    t.match(await page.locator('main').textContent(), /host-a1.*host-a3/s)
    await screenshot(page, '10-dpu')
    await page.goto(`${base}/ui/public-ips`)
    t.match(await page.locator('main table').textContent(), /203\.0\.113\.7.*host-a1/s)
    await screenshot(page, '11-public-ips')
  })

  await t.test('a DPU whose agent stops beating turns Lost without a reload', async (t) => {
    await page.goto(`${base}/ui/dpus`)
    await page.waitForSelector('body[data-live-state="open"]')
    t.equal(await badge(page, 'dpu/dpu-2').textContent(), 'Online')
    await page.evaluate("document.body.setAttribute('data-not-reloaded', 'yes')")
    // dpu-2 beats once more, every 0.5 s by its word, then goes silent: Lost after 1 s.
    const beats = new Heartbeats(p.controller.redis)
    const versions = ['1.0', '2.0']
    await beats.write({ ...heartbeat('dpu-2', versions), intervalMs: 500 }, 60_000)
    await becomes(page, 'dpu/dpu-2', 'Lost')
    t.equal(await page.locator('body').getAttribute('data-not-reloaded'), 'yes', 'not reloaded')
    await beats.write(heartbeat('dpu-2', versions), 60_000)
    await becomes(page, 'dpu/dpu-2', 'Online')
    t.pass('and Online again once it beats')
  })

  await t.test('re-drive a Failed host, with confirmation', async (t) => {
    // The pool's one address is host-a1's: host-a5 fails, POOL_EXHAUSTED.
    await p.agent('dpu-5')
    await p.client.applyHost(
      'host-a5',
      hostSpec('group-a', 'dpu-5', 6, { hostAccess: 'PublicAccess' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-a5'),
      (h) => h?.status.phase === 'Failed',
      30_000,
    )
    await p.client.registerPublicIp('203.0.113.8')
    await page.goto(`${base}/ui/hosts/host-a5`)
    t.equal(await badge(page, 'host/host-a5').textContent(), 'Failed')
    await page.getByRole('link', { name: 'Re-drive this host…' }).click()
    await screenshot(page, '12-redrive-confirm')
    await page.getByRole('button', { name: 'Re-drive the host' }).click()
    await page.waitForSelector('.flash')
    t.match(await page.locator('.flash').textContent(), /re-driven: attempt 2 started/)
    const ready = await readyHost(p, 'host-a5')
    t.equal(ready?.status.hostAccessIPs?.publicIP, '203.0.113.8')
    await becomes(page, 'host/host-a5', 'Ready')
    t.pass('and the page shows it Ready')
  })

  await t.test('run reconcile now, with confirmation', async (t) => {
    await page.goto(`${base}/ui/`)
    await page.getByRole('link', { name: 'Run reconcile now…' }).click()
    await page.getByRole('button', { name: 'Run reconcile now' }).click()
    await page.waitForSelector('.flash')
    const flash = (await page.locator('.flash').textContent()) ?? ''
    const id = /job (reconcile-now-[^)]+)\)/.exec(flash)?.[1] ?? ''
    t.ok(id, 'the flash names the job')
    const state = await until(
      async () => (await p.controller.queue.getJobState(id)) as string,
      (s) => s === 'completed' || s === 'failed',
    )
    t.equal(state, 'completed', 'the reconcile ran')
  })

  await t.test('force-delete a host, with confirmation', async (t) => {
    await page.goto(`${base}/ui/hosts/host-a2`)
    await page.getByRole('link', { name: 'Force-delete this host…' }).click()
    await expectingStatus(400, async () => {
      await page.getByLabel('Type host-a2 to confirm').fill('host-a1')
      await page.getByRole('button', { name: 'Force-delete the host' }).click()
      await page.waitForSelector('h1:has-text("Not valid")')
    })
    t.match(
      await page.locator('main').textContent(),
      /confirm.*must be host-a2/s,
      'names the field',
    )
    t.ok(await p.controller.store.hosts.get('host-a2'), 'nothing was deleted')

    await page.goto(`${base}/ui/hosts/host-a2/delete`)
    await page.getByLabel('Type host-a2 to confirm').fill('host-a2')
    await screenshot(page, '13-force-delete-confirm')
    await page.getByRole('button', { name: 'Force-delete the host' }).click()
    await page.waitForURL(`${base}/ui/groups/group-a`)
    t.match(await page.locator('.flash').textContent(), /host-a2 is being force-deleted/)
    await until(
      () => p.controller.store.hosts.get('host-a2'),
      (h) => h === undefined,
      30_000,
    )
    await page.reload()
    t.equal(await page.locator('svg [data-host="host-a2"]').count(), 0, 'gone from the picture')
    t.same(
      await page
        .locator('svg [data-kind="gateway-router"]')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-dpu'))),
      ['dpu-1', 'dpu-4', 'dpu-5'],
      "and with it dpu-2's gateway router: no other host of the group is on dpu-2",
    )
  })

  await t.test('a tenant sees only its own tenant', async (t) => {
    const tenant = await browser.newContext({ viewport: VIEWPORT })
    t.teardown(() => tenant.close())
    const tpage = await watchedPage(tenant, problems)
    await signIn(tpage, base, TENANT_A)
    t.same(await tpage.locator('tr[data-kind="group"] th a').allTextContents(), ['group-a'])
    const hosts = await tpage.locator('tr[data-kind="host"] th a').allTextContents()
    t.notOk(hosts.includes('host-b1'), "another tenant's host is not listed")
    t.equal(
      await tpage.getByRole('navigation', { name: 'Main' }).getByRole('link').count(),
      1,
      'no operator pages in the nav',
    )
    t.equal(await tpage.getByRole('link', { name: 'Run reconcile now…' }).count(), 0)
    await screenshot(tpage, '14-tenant-overview')
    const other = await tenant.request.get(`${base}/ui/groups/group-b`)
    t.equal(other.status(), 404, "another tenant's group is 404")
    const otherHost = await tenant.request.get(`${base}/ui/hosts/host-b1`)
    t.equal(otherHost.status(), 404, "another tenant's host is 404")
    t.equal((await tenant.request.get(`${base}/ui/dpus`)).status(), 403, 'DPUs: operators only')
    t.equal((await tenant.request.get(`${base}/ui/public-ips`)).status(), 403)
    // With the tenant session's own CSRF token (its sign-out form's): refused for who it is.
    await tpage.goto(`${base}/ui/`)
    const csrf = (await tpage.locator('input[name="csrf"]').first().getAttribute('value')) ?? ''
    t.ok(csrf.length > 20, "the tenant session's CSRF token")
    const reconcile = await tenant.request.post(`${base}/ui/reconcile`, {
      form: { csrf, confirm: 'yes' },
    })
    t.equal(reconcile.status(), 403, 'reconcile now: operators only')
    t.match(await reconcile.text(), /only an operator/, 'refused as a tenant, not for its form')
    await expectingStatus(404, async () => {
      await tpage.goto(`${base}/ui/groups/group-b`)
    })
    await screenshot(tpage, '15-tenant-not-found')
    await tpage.goto(`${base}/ui/groups/group-a`)
    t.equal(await tpage.locator('svg [data-kind="host"]').count(), 4, 'its own group is drawn')
    await screenshot(tpage, '16-tenant-group')

    await tpage.getByRole('button', { name: 'Sign out' }).click()
    await tpage.waitForURL(`${base}/ui/sign-in`)
    const after = await tenant.request.get(`${base}/ui/`, { maxRedirects: 0 })
    t.equal(after.status(), 303, 'signed out: the session is gone')
  })

  await t.test('a form without the session CSRF token is refused', async (t) => {
    const res = await operator.request.post(`${base}/ui/hosts/host-a3/delete`, {
      form: { csrf: 'forged', confirm: 'host-a3' },
    })
    t.equal(res.status(), 403)
    t.ok(await p.controller.store.hosts.get('host-a3'), 'nothing was deleted')
  })

  await t.test('a live refresh of a trace result does not trace again', async (t) => {
    const traced: string[] = []
    const seen = (request: Request) => {
      if (new URL(request.url()).pathname.endsWith('/trace')) traced.push(request.url())
    }
    page.on('request', seen)
    t.teardown(() => page.off('request', seen))
    // host-b1's DPU has no agent yet: traced now, then it turns Ready on the page.
    await expectingStatus(409, async () => {
      await page.goto(`${base}/ui/hosts/host-b1`)
      await page.getByLabel('To (host or address)').fill('10.20.0.1')
      await page.getByRole('button', { name: 'Trace' }).click()
      await page.waitForSelector('#trace-result')
    })
    await page.waitForSelector('body[data-live-state="open"]')
    const result = await page.locator('#trace-result').textContent()
    await p.agent('dpu-3')
    await becomes(page, 'host/host-b1', 'Ready')
    await page
      .locator('#host-status', { hasText: 'Configs synced' })
      .getByText('yes')
      .first()
      .waitFor()
    t.pass("the host's status section followed")
    t.equal(traced.length, 1, 'traced once, when asked: the refresh read the host, not the trace')
    t.equal(await page.locator('#trace-result').textContent(), result, 'the result stays shown')
  })

  t.same(problems, [], 'no console errors and no page errors on any page')
})

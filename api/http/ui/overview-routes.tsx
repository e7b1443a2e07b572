/**
 * The UI's overview and the operators' pages: running reconcile now, the DPUs and the
 * public IP pool (a tenant gets 403).
 */
import type { Hono } from 'hono'
import { validate } from '../../../app/index.ts'
import { operatorOnly } from './guards.ts'
import { ConfirmPage } from './pages/confirm.tsx'
import { DpuPage, DpusPage } from './pages/dpus.tsx'
import { OverviewPage } from './pages/overview.tsx'
import { PublicIpsPage } from './pages/public-ips.tsx'
import {
  ActionForm,
  bounded,
  type Env,
  frameOf,
  page,
  type RouteKit,
  UI_PATH,
} from './route-kit.tsx'

/** Adds the overview and the operators' pages to the UI's `app`. */
export function overviewRoutes(app: Hono<Env>, { ops, done }: RouteKit): void {
  // ── overview ─────────────────────────────────────────────────────────────
  app.get('/', async (c) => {
    const o = ops(c)
    const operator = c.get('session').principal.kind === 'operator'
    const [groups, hosts, dpus, publicIps] = await Promise.all([
      bounded((p) => o.listGroups({}, p)),
      bounded((p) => o.listHosts({}, p)),
      operator ? bounded((p) => o.listDpus(p)) : undefined,
      operator ? bounded((p) => o.listPublicIps(p)) : undefined,
    ])
    return page(
      c,
      <OverviewPage
        frame={frameOf(c)}
        data={{ groups, hosts, ...(dpus ? { dpus } : {}), ...(publicIps ? { publicIps } : {}) }}
      />,
    )
  })

  app.get('/reconcile', operatorOnly, (c) =>
    page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title="Run reconcile now"
        message="Reconcile compares every group's OVN rows with what Hydrazine wants and repairs the difference (repairs are listed in each object's events). It runs on its own every 30 seconds; this runs it once now, after any run under way."
        action={`${UI_PATH}/reconcile`}
        button="Run reconcile now"
        back={`${UI_PATH}/`}
      />,
    ),
  )
  app.post('/reconcile', operatorOnly, async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const job = await ops(c).reconcileNow()
    return done(c, `Reconcile queued (job ${job}).`, `${UI_PATH}/`)
  })

  // ── operators only: DPUs and the public IP pool ──────────────────────────
  app.get('/dpus', operatorOnly, async (c) => {
    const o = ops(c)
    const dpus = await bounded((p) => o.listDpus(p))
    return page(c, <DpusPage frame={frameOf(c)} dpus={dpus} />)
  })
  app.get('/dpus/:id', operatorOnly, async (c) => {
    const o = ops(c)
    const id = c.req.param('id')
    const [dpu, events] = await Promise.all([o.getDpu(id), o.dpuEvents(id)])
    return page(c, <DpuPage frame={frameOf(c)} dpu={dpu} events={events} />)
  })
  app.get('/public-ips', operatorOnly, async (c) => {
    const o = ops(c)
    const ips = await bounded((p) => o.listPublicIps(p))
    return page(c, <PublicIpsPage frame={frameOf(c)} ips={ips} />)
  })
}

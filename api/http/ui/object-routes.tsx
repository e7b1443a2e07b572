/**
 * The UI's pages and actions on groups and hosts: a group's page and re-drive; a host's
 * page, packet trace, force-delete and re-drive.
 */
import type { Context, Hono } from 'hono'
import type { DpuView, Operations } from '../../../app/index.ts'
import { NotFoundError, type TraceAnswer, validate } from '../../../app/index.ts'
import { ApiError, type ErrorBody } from '../errors.ts'
import { traceAnswer } from '../trace.ts'
import { ConfirmPage } from './pages/confirm.tsx'
import { GroupPage } from './pages/group.tsx'
import { HostPage, type TraceShown } from './pages/host.tsx'
import {
  ActionForm,
  bounded,
  type Env,
  frameOf,
  page,
  type RouteKit,
  UI_PATH,
} from './route-kit.tsx'
import { topologyModel } from './topology.tsx'

/**
 * The state of each of `ids` (a group's DPUs, to colour their gateway routers), read one
 * by one: a DPU this caller may not see, or that no longer exists, is left out (Unknown).
 */
async function dpuStates(
  o: Operations,
  ids: ReadonlySet<string>,
): Promise<Pick<DpuView, 'id' | 'state'>[]> {
  const read = await Promise.all(
    [...ids].map((id) =>
      o.getDpu(id).catch((error: unknown) => {
        if (error instanceof NotFoundError) return undefined
        throw error
      }),
    ),
  )
  return read.flatMap((dpu) => (dpu ? [{ id: dpu.id, state: dpu.state }] : []))
}

/** The request a re-drive applies again: the stored spec, the DPU by id only. */
function redriveSpec<S extends { dpu: { id: string } }>(spec: S): Record<string, unknown> {
  return { ...spec, dpu: { id: spec.dpu.id } }
}

/** Adds the group and host routes to the UI's `app`. */
export function objectRoutes(app: Hono<Env>, { ops, done, toJson }: RouteKit): void {
  // ── groups ───────────────────────────────────────────────────────────────
  app.get('/groups/:name', async (c) => {
    const o = ops(c)
    const name = c.req.param('name')
    const group = await o.getGroup(name)
    const [hosts, events, ipam] = await Promise.all([
      bounded((p) => o.listHosts({ resourceGroup: name }, p)),
      o.groupEvents(name),
      o.groupIpam(name).catch((error: unknown) => {
        if (error instanceof NotFoundError) {
          return { unavailable: 'The network is not made yet: no address map.' }
        }
        throw error
      }),
    ])
    const dpus = await dpuStates(o, new Set(hosts.items.map((h) => h.spec.dpu.id)))
    return page(
      c,
      <GroupPage
        frame={frameOf(c)}
        data={{
          group,
          hosts: hosts.items,
          moreHosts: hosts.more,
          topology: topologyModel(group, hosts.items, dpus),
          ipam,
          events,
        }}
      />,
    )
  })
  app.get('/groups/:name/redrive', async (c) => {
    const group = await ops(c).getGroup(c.req.param('name'))
    const path = `${UI_PATH}/groups/${encodeURIComponent(group.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Re-drive group ${group.name}`}
        message={`Group ${group.name} is ${group.status.phase}. Re-driving applies its spec (version ${group.specVersion}) again: a Failed group starts a new attempt.`}
        action={`${path}/redrive`}
        button="Re-drive the group"
        back={path}
      />,
    )
  })
  app.post('/groups/:name/redrive', async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const group = await o.getGroup(c.req.param('name'))
    const path = `${UI_PATH}/groups/${encodeURIComponent(group.name)}`
    if (group.status.phase !== 'Failed' || group.deletion) {
      throw new ApiError(
        409,
        'CONFLICT',
        `only a Failed group is re-driven; ${group.name} is ${group.status.phase}`,
      )
    }
    const accepted = await o.applyGroup(group.name, { ...group.spec })
    return done(
      c,
      accepted.jobId
        ? `Group ${group.name} re-driven: attempt ${accepted.object.status.attempt ?? 1} started (job ${accepted.jobId}).`
        : `Group ${group.name} needed nothing: it is ${accepted.object.status.phase}.`,
      path,
    )
  })

  // ── hosts ────────────────────────────────────────────────────────────────
  const hostPage = async (
    c: Context<Env>,
    trace?: TraceShown,
    status: 200 | 400 | 404 | 409 | 503 = 200,
  ) => {
    const o = ops(c)
    const name = c.req.param('name') ?? ''
    const host = await o.getHost(name)
    const events = await o.hostEvents(name)
    return page(
      c,
      <HostPage frame={frameOf(c)} host={host} events={events} {...(trace ? { trace } : {})} />,
      status,
    )
  }
  app.get('/hosts/:name', (c) => hostPage(c))
  app.get('/hosts/:name/trace', async (c) => {
    const shown = {
      to: c.req.query('to') ?? '',
      proto: c.req.query('proto') ?? 'icmp',
      port: c.req.query('port') ?? '',
    }
    // The form's fields as `GET /v1/trace` takes them (a blank port: none), checked as the
    // API checks them: a bad one is named in the page, as the API names it.
    const port = shown.port.trim()
    const query = {
      from: [c.req.param('name')],
      to: [shown.to.trim()],
      proto: [shown.proto],
      ...(port ? { port: [port] } : {}),
    }
    let answer: TraceAnswer
    try {
      answer = await traceAnswer(query, ops(c))
    } catch (error) {
      const answered = toJson(error instanceof Error ? error : new Error(String(error)), c)
      if (answered.status >= 500 && answered.status !== 503) throw error
      const { error: body } = (await answered.json()) as ErrorBody
      const fields = body.issues?.map((i) => `${i.path}: ${i.message}`).join('; ')
      return hostPage(
        c,
        { ...shown, error: `Not traced: ${fields ?? body.message}` },
        answered.status as 400 | 404 | 409 | 503,
      )
    }
    return hostPage(c, { ...shown, answer })
  })
  app.get('/hosts/:name/delete', async (c) => {
    const host = await ops(c).getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Force-delete host ${host.name}`}
        message={`Host ${host.name} (group ${host.spec.resourceGroup}, DPU ${host.spec.dpu.id}) is ${host.status.phase}. A forced deletion detaches it without waiting for its DPU's agent to acknowledge: its port is removed from OVN and its addresses are released even if the DPU does not answer.`}
        action={`${path}/delete`}
        button="Force-delete the host"
        back={path}
        danger
        typeName={host.name}
      />,
    )
  })
  app.post('/hosts/:name/delete', async (c) => {
    const form = validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const host = await o.getHost(c.req.param('name'))
    if (form.confirm !== host.name) {
      throw new ApiError(400, 'INVALID', `type the host's name, ${host.name}, to force-delete it`, [
        { path: 'confirm', message: `must be ${host.name}` },
      ])
    }
    const accepted = await o.deleteHost(host.name, true)
    return done(
      c,
      `Host ${host.name} is being force-deleted${accepted.jobId ? ` (job ${accepted.jobId})` : ''}.`,
      `${UI_PATH}/groups/${encodeURIComponent(host.spec.resourceGroup)}`,
    )
  })
  app.get('/hosts/:name/redrive', async (c) => {
    const host = await ops(c).getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Re-drive host ${host.name}`}
        message={`Host ${host.name} is ${host.status.phase}. Re-driving applies its spec (version ${host.specVersion}) again: a Failed host starts a new attempt.`}
        action={`${path}/redrive`}
        button="Re-drive the host"
        back={path}
      />,
    )
  })
  app.post('/hosts/:name/redrive', async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const host = await o.getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    if (host.status.phase !== 'Failed' || host.deletion) {
      throw new ApiError(
        409,
        'CONFLICT',
        `only a Failed host is re-driven; ${host.name} is ${host.status.phase}`,
      )
    }
    const accepted = await o.applyHost(host.name, redriveSpec(host.spec))
    return done(
      c,
      accepted.jobId
        ? `Host ${host.name} re-driven: attempt ${accepted.object.status.attempt ?? 1} started (job ${accepted.jobId}).`
        : `Host ${host.name} needed nothing: it is ${accepted.object.status.phase}.`,
      path,
    )
  })
}

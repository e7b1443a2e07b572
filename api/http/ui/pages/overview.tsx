/**
 * `/ui/`: what the principal may see at a glance — counts of groups, hosts, DPUs and
 * public IPs, then each list with whatever is not Ready (or not Online) first.
 */

import type { DpuView } from '../../../../app/index.ts'
import type { ManagedResource, PublicIp, ResourceGroup } from '../../../../lib/model/objects.ts'
import { type Frame, Layout, Phase, Time } from '../layout.tsx'
import { groupPhase, hostPhase, SETTLED } from '../phase.ts'

/** A list read up to the UI's bound: `more` when there were more than it shows. */
export interface Bounded<T> {
  readonly items: readonly T[]
  readonly more: boolean
}

export interface OverviewData {
  readonly groups: Bounded<ResourceGroup>
  readonly hosts: Bounded<ManagedResource>
  /** Operators only. */
  readonly dpus?: Bounded<DpuView>
  readonly publicIps?: Bounded<PublicIp>
}

/** Needing attention first (not Ready / not Online), then by name. */
export function attentionFirst<T>(
  items: readonly T[],
  phase: (t: T) => string,
  name: (t: T) => string,
): T[] {
  return [...items].sort((a, b) => {
    const ua = SETTLED.has(phase(a)) ? 1 : 0
    const ub = SETTLED.has(phase(b)) ? 1 : 0
    return ua - ub || name(a).localeCompare(name(b))
  })
}

function Card(props: {
  title: string
  kind: string
  total: number
  attention: number
  word: string
  href?: string
  more: boolean
}) {
  return (
    <section class="card" aria-labelledby={`card-${props.kind}`}>
      <h2 id={`card-${props.kind}`}>
        {props.href ? <a href={props.href}>{props.title}</a> : props.title}
      </h2>
      <div class="big">
        <span data-count={`${props.kind}:all`}>{props.total}</span>
        {props.more ? '+' : ''}
      </div>
      <div class={props.attention > 0 ? 'attention' : ''}>
        <span data-count={`${props.kind}:attention`}>{props.attention}</span>
        {` ${props.word}`}
      </div>
    </section>
  )
}

const moreNote = (what: string, b: Bounded<unknown>) =>
  b.more ? (
    <p class="notice">{`Showing the first ${b.items.length} ${what}; there are more.`}</p>
  ) : null

export function OverviewPage(props: { frame: Frame; data: OverviewData }) {
  const { frame, data } = props
  const operator = frame.principal.kind === 'operator'
  const groups = attentionFirst(data.groups.items, groupPhase, (g) => g.name)
  const hosts = attentionFirst(data.hosts.items, hostPhase, (h) => h.name)
  const dpus = data.dpus
    ? attentionFirst(
        data.dpus.items,
        (d) => d.state,
        (d) => d.id,
      )
    : undefined
  const notSettled = <T,>(items: readonly T[], phase: (t: T) => string) =>
    items.filter((i) => !SETTLED.has(phase(i))).length
  const allocated = data.publicIps?.items.filter((p) => p.allocated).length ?? 0
  return (
    <Layout title="Overview" frame={frame} nav="overview" page="overview" live>
      <h1>Overview</h1>
      <div class="cards">
        <Card
          title="Groups"
          kind="group"
          total={groups.length}
          attention={notSettled(groups, groupPhase)}
          word="not Ready"
          more={data.groups.more}
        />
        <Card
          title="Hosts"
          kind="host"
          total={hosts.length}
          attention={notSettled(hosts, hostPhase)}
          word="not Ready"
          more={data.hosts.more}
        />
        {dpus && data.dpus ? (
          <Card
            title="DPUs"
            kind="dpu"
            href="/ui/dpus"
            total={dpus.length}
            attention={notSettled(dpus, (d) => d.state)}
            word="not Online"
            more={data.dpus.more}
          />
        ) : null}
        {data.publicIps ? (
          <section class="card" aria-labelledby="card-public-ips">
            <h2 id="card-public-ips">
              <a href="/ui/public-ips">Public IPs</a>
            </h2>
            <div class="big">{data.publicIps.items.length}</div>
            <div>{`${allocated} allocated, ${data.publicIps.items.length - allocated} free`}</div>
          </section>
        ) : null}
      </div>
      {operator ? (
        <div class="actions">
          <a class="button" href="/ui/reconcile">
            Run reconcile now…
          </a>
        </div>
      ) : null}

      <h2 id="groups">Groups</h2>
      {moreNote('groups', data.groups)}
      {groups.length === 0 ? (
        <p>No groups.</p>
      ) : (
        <table aria-labelledby="groups">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Tenant</th>
              <th scope="col">Network</th>
              <th scope="col" class="num">
                Hosts
              </th>
              <th scope="col">Phase</th>
            </tr>
          </thead>
          <tbody>
            {groups.map((g) => (
              <tr data-kind="group" data-object={`group/${g.name}`} data-phase={groupPhase(g)}>
                <th scope="row">
                  <a href={`/ui/groups/${encodeURIComponent(g.name)}`}>{g.name}</a>
                </th>
                <td>{g.spec.tenantId}</td>
                <td class="mono">
                  {[g.spec.network?.cidr, g.spec.network6?.cidr].filter(Boolean).join(', ')}
                </td>
                <td class="num">{g.status.managedResourceCount}</td>
                <td>
                  <Phase phase={groupPhase(g)} object={`group/${g.name}`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2 id="hosts">Hosts</h2>
      {moreNote('hosts', data.hosts)}
      {hosts.length === 0 ? <p>No hosts.</p> : <HostsTable hosts={hosts} labelledBy="hosts" />}

      {dpus && data.dpus ? (
        <>
          <h2 id="dpus">DPUs</h2>
          {moreNote('DPUs', data.dpus)}
          <DpusTable dpus={dpus} labelledBy="dpus" />
        </>
      ) : null}
    </Layout>
  )
}

export function HostsTable(props: {
  hosts: readonly ManagedResource[]
  labelledBy: string
  showGroup?: boolean
}) {
  const showGroup = props.showGroup ?? true
  return (
    <table aria-labelledby={props.labelledBy}>
      <thead>
        <tr>
          <th scope="col">Name</th>
          {showGroup ? <th scope="col">Group</th> : null}
          <th scope="col">DPU</th>
          <th scope="col">IP</th>
          <th scope="col">Access</th>
          <th scope="col">Public IP</th>
          <th scope="col">Phase</th>
        </tr>
      </thead>
      <tbody>
        {props.hosts.map((h) => (
          <tr data-kind="host" data-object={`host/${h.name}`} data-phase={hostPhase(h)}>
            <th scope="row">
              <a href={`/ui/hosts/${encodeURIComponent(h.name)}`}>{h.name}</a>
            </th>
            {showGroup ? (
              <td>
                <a href={`/ui/groups/${encodeURIComponent(h.spec.resourceGroup)}`}>
                  {h.spec.resourceGroup}
                </a>
              </td>
            ) : null}
            <td>{h.spec.dpu.id}</td>
            <td class="mono">{h.status.hostAccessIPs?.hostIP ?? h.spec.hostIP ?? '—'}</td>
            <td>{h.spec.hostAccess}</td>
            <td class="mono">{h.status.hostAccessIPs?.publicIP ?? '—'}</td>
            <td>
              <Phase phase={hostPhase(h)} object={`host/${h.name}`} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function DpusTable(props: { dpus: readonly DpuView[]; labelledBy: string }) {
  return (
    <table aria-labelledby={props.labelledBy}>
      <thead>
        <tr>
          <th scope="col">DPU</th>
          <th scope="col">Tenant</th>
          <th scope="col">Fabric IPs</th>
          <th scope="col">State</th>
          <th scope="col">Last heartbeat</th>
          <th scope="col" class="num">
            Hosts
          </th>
          <th scope="col">Agent</th>
        </tr>
      </thead>
      <tbody>
        {props.dpus.map((d) => (
          <tr data-kind="dpu" data-object={`dpu/${d.id}`} data-phase={d.state}>
            <th scope="row">
              <a href={`/ui/dpus/${encodeURIComponent(d.id)}`}>{d.id}</a>
            </th>
            <td>{d.spec?.tenantId ?? '—'}</td>
            <td class="mono">{d.spec?.fabricIps.join(', ') ?? '—'}</td>
            <td>
              <Phase phase={d.state} object={`dpu/${d.id}`} />
            </td>
            <td>
              <Time at={d.lastHeartbeat} />
            </td>
            <td class="num">{d.hosts.length}</td>
            <td>{d.agent?.version ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

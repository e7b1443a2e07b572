/**
 * `/ui/hosts/:name`: a host's spec, status, conditions and events; a trace form (where
 * does a packet from this host go) with its verdict and hops; force-delete, and re-drive
 * when it is Failed. A live refresh of a trace's page reads the host's page, never the
 * trace's: the verdict shown stays the one traced when asked.
 */

import type { TraceAnswer } from '../../../../app/index.ts'
import type { ObjectEvent } from '../../../../lib/model/events.ts'
import type { ManagedResource } from '../../../../lib/model/objects.ts'
import { ConditionsTable, EventsTable, Facts, type Frame, Layout, Phase } from '../layout.tsx'
import { hostPhase } from '../phase.ts'

/** The trace form as submitted, and what came of it. */
export interface TraceShown {
  readonly to: string
  readonly proto: string
  readonly port: string
  readonly answer?: TraceAnswer
  /** Why it could not be traced (a refusal's message, fields named). */
  readonly error?: string
}

export function HostPage(props: {
  frame: Frame
  host: ManagedResource
  events: readonly ObjectEvent[]
  trace?: TraceShown
}) {
  const { host, events, trace } = props
  const phase = hostPhase(host)
  const object = `host/${host.name}`
  const base = `/ui/hosts/${encodeURIComponent(host.name)}`
  const ips = host.status.hostAccessIPs
  return (
    <Layout title={`Host ${host.name}`} frame={props.frame} page="host" live refreshFrom={base}>
      <h1>
        {`Host ${host.name} `}
        <Phase phase={phase} object={object} />
      </h1>
      <div class="two">
        <section aria-labelledby="spec">
          <h2 id="spec">Spec</h2>
          <Facts
            facts={[
              [
                'Group',
                <a href={`/ui/groups/${encodeURIComponent(host.spec.resourceGroup)}`}>
                  {host.spec.resourceGroup}
                </a>,
              ],
              ['MAC', <span class="mono">{host.spec.hostMAC}</span>],
              ['Asked IP', host.spec.hostIP],
              ['Pool', host.spec.pool],
              [
                'DPU',
                props.frame.principal.kind === 'operator' ? (
                  <a href={`/ui/dpus/${encodeURIComponent(host.spec.dpu.id)}`}>
                    {host.spec.dpu.id}
                  </a>
                ) : (
                  host.spec.dpu.id
                ),
              ],
              ['DPU fabric IPs', host.spec.dpu.ips.join(', ')],
              ['DPU IPv6 NAT address', host.spec.dpu.natIp6],
              ['Host port', host.spec.identifier],
              ['Access', host.spec.hostAccess],
              ['DNS name', host.spec.hostname ?? host.name],
              ['Spec version', String(host.specVersion)],
            ]}
          />
        </section>
        <section aria-labelledby="status" id="host-status" data-refresh>
          <h2 id="status">Status</h2>
          <Facts
            facts={[
              ['Phase', <Phase phase={phase} object={object} />],
              ['Host IP', ips?.hostIP],
              ['Host IPv6', ips?.hostIPv6],
              ['Fabric IP', ips?.fabricIP],
              ['Fabric IPv6', ips?.fabricIPv6],
              ['Public IP', ips?.publicIP],
              ['Public IPv6', ips?.publicIPv6],
              ['Logical port', host.status.logicalPortReference?.logicalPort],
              ['Agent host port', host.status.agent?.hostPort],
              [
                'OVN installed',
                host.status.agent ? (host.status.agent.ovnInstalled ? 'yes' : 'no') : '',
              ],
              [
                'Observed version',
                `${host.status.observedVersion}${host.status.attempt ? ` (attempt ${host.status.attempt})` : ''}`,
              ],
              ['Configs synced', host.status.configsSynced ? 'yes' : 'no'],
              [
                'Deletion',
                host.deletion
                  ? `asked ${host.deletion.requestedAt}${host.deletion.force ? ' (forced)' : ''}`
                  : '',
              ],
            ]}
          />
        </section>
      </div>
      <div class="actions">
        {host.status.phase === 'Failed' && !host.deletion ? (
          <a class="button" href={`${base}/redrive`}>
            Re-drive this host…
          </a>
        ) : null}
        <a class="button danger" href={`${base}/delete`}>
          Force-delete this host…
        </a>
      </div>

      <h2 id="conditions">Conditions</h2>
      <div id="host-conditions" data-refresh>
        <ConditionsTable conditions={host.status.conditions} />
      </div>

      <h2 id="trace">Trace a packet</h2>
      <form method="get" action={`${base}/trace`} aria-labelledby="trace">
        <div class="field-row">
          <div>
            <label for="trace-to">To (host or address)</label>
            <input id="trace-to" name="to" required value={trace?.to ?? ''} maxlength={253} />
          </div>
          <div>
            <label for="trace-proto">Protocol</label>
            <select id="trace-proto" name="proto">
              {['icmp', 'tcp', 'udp'].map((p) => (
                <option value={p} selected={(trace?.proto || 'icmp') === p}>
                  {p}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="trace-port">Port (tcp, udp)</label>
            <input
              id="trace-port"
              name="port"
              inputmode="numeric"
              value={trace?.port ?? ''}
              maxlength={5}
            />
          </div>
          <div>
            <button type="submit" class="primary">
              Trace
            </button>
          </div>
        </div>
      </form>
      {trace?.error ? (
        <p class="error" role="alert" id="trace-result">
          {trace.error}
        </p>
      ) : null}
      {trace?.answer ? (
        <section aria-labelledby="trace-result" data-verdict={trace.answer.verdict}>
          <h3 id="trace-result">{`Verdict: ${trace.answer.verdict}`}</h3>
          <p>{trace.answer.summary}</p>
          {trace.answer.hops.length > 0 ? (
            <ol>
              {trace.answer.hops.map((h) => (
                <li>{h}</li>
              ))}
            </ol>
          ) : null}
          {trace.answer.notes.length > 0 ? (
            <ul>
              {trace.answer.notes.map((n) => (
                <li>{n}</li>
              ))}
            </ul>
          ) : null}
        </section>
      ) : null}

      <h2 id="events">Events</h2>
      <div id="host-events" data-refresh>
        <EventsTable events={events} label={`Events of host ${host.name}`} />
      </div>
    </Layout>
  )
}

/**
 * `/ui/dpus` and `/ui/dpus/:id` (operators only): every DPU the system knows — its
 * inventory entry, heartbeat state and last beat, agent version, the hosts it serves, the
 * network each of its host ports is on (a tenant's, the admin network, none) and the ports
 * its agent reports bound — and one DPU's events.
 */

import type { DpuView } from '../../../../app/index.ts'
import type { ObjectEvent } from '../../../../lib/model/events.ts'
import { EventsTable, Facts, type Frame, Layout, Phase, Time } from '../layout.tsx'
import { attentionFirst, type Bounded, DpusTable } from './overview.tsx'

export function DpusPage(props: { frame: Frame; dpus: Bounded<DpuView> }) {
  const dpus = attentionFirst(
    props.dpus.items,
    (d) => d.state,
    (d) => d.id,
  )
  return (
    <Layout title="DPUs" frame={props.frame} nav="dpus" page="dpus" live>
      <h1 id="dpus">DPUs</h1>
      <p class="lead">
        Heartbeat state: Online under 1.5 intervals since the last beat, Stale under 2, Lost after;
        Unknown when never heard from.
      </p>
      {props.dpus.more ? <p class="notice">{`Showing the first ${dpus.length} DPUs.`}</p> : null}
      {dpus.length === 0 ? <p>No DPUs.</p> : <DpusTable dpus={dpus} labelledBy="dpus" />}
    </Layout>
  )
}

export function DpuPage(props: { frame: Frame; dpu: DpuView; events: readonly ObjectEvent[] }) {
  const { dpu } = props
  const observed = dpu.agent?.observed
  return (
    <Layout title={`DPU ${dpu.id}`} frame={props.frame} nav="dpus" page="dpu" live>
      <h1>
        {`DPU ${dpu.id} `}
        <Phase phase={dpu.state} object={`dpu/${dpu.id}`} />
      </h1>
      <Facts
        facts={[
          [
            'In the inventory',
            dpu.spec
              ? `yes (version ${dpu.specVersion ?? '?'})`
              : 'no: its agent reports, the operator has not added it',
          ],
          ['Tenant', dpu.spec?.tenantId ?? (dpu.spec ? 'none (shared)' : '')],
          ['Fabric IPs', dpu.spec?.fabricIps.join(', ')],
          ['IPv6 NAT address', dpu.spec?.natIp6],
          ['Host ports', dpu.spec?.hostPorts.join(', ')],
          ['Last heartbeat', <Time at={dpu.lastHeartbeat} />],
          ['Heartbeat interval', dpu.agent ? `${dpu.agent.heartbeatIntervalMs / 1000} s` : ''],
          ['Agent version', dpu.agent?.version],
          ['Protocol versions', dpu.agent?.protocolVersions.join(', ')],
          ['Chassis', observed?.chassis],
          [
            'ovn-controller',
            observed
              ? `${observed.ovnController.running ? 'running' : 'not running'}, ${observed.ovnController.connected ? 'connected' : 'not connected'}`
              : '',
          ],
          ['OVN remote', observed?.ovnRemote ?? ''],
          ['Bridges', observed?.bridges.join(', ')],
        ]}
      />
      <h2 id="hosts">Hosts</h2>
      {dpu.hosts.length === 0 ? (
        <p>No hosts.</p>
      ) : (
        <ul>
          {dpu.hosts.map((h) => (
            <li>
              <a href={`/ui/hosts/${encodeURIComponent(h)}`}>{h}</a>
            </li>
          ))}
        </ul>
      )}
      <h2 id="networks">Host ports and their networks</h2>
      <PortNetworks ports={dpu.ports} />
      <h2 id="ports">Bound ports</h2>
      {observed && observed.boundPorts.length > 0 ? (
        <table aria-labelledby="ports">
          <thead>
            <tr>
              <th scope="col">Port</th>
              <th scope="col">Logical port</th>
              <th scope="col">Group</th>
              <th scope="col">OVN installed</th>
            </tr>
          </thead>
          <tbody>
            {observed.boundPorts.map((p) => (
              <tr>
                <th scope="row">{p.port}</th>
                <td class="mono">{p.logicalPort}</td>
                <td>{p.group}</td>
                <td>{p.ovnInstalled ? 'yes' : 'no'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>{observed ? 'No ports bound.' : 'Its agent has not reported.'}</p>
      )}
      {observed && observed.relays.length > 0 ? (
        <>
          <h2 id="relays">DHCP relays</h2>
          <table aria-labelledby="relays">
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col">Port</th>
                <th scope="col">DHCP server</th>
                <th scope="col">Running</th>
              </tr>
            </thead>
            <tbody>
              {observed.relays.map((r) => (
                <tr>
                  <th scope="row">{r.group}</th>
                  <td class="mono">{r.port}</td>
                  <td>{r.dhcpServer}</td>
                  <td>{r.running ? 'yes' : 'no'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : null}
      <h2 id="events">Events</h2>
      <EventsTable events={props.events} label={`Events of DPU ${dpu.id}`} />
    </Layout>
  )
}

/** Each host port of the DPU and the network it is on: a tenant's, the admin network, or none and why. */
function PortNetworks(props: { ports: DpuView['ports'] }) {
  const ports = props.ports ?? []
  if (ports.length === 0) return <p>No host ports in the inventory.</p>
  return (
    <table aria-labelledby="networks">
      <thead>
        <tr>
          <th scope="col">Port</th>
          <th scope="col">Network</th>
          <th scope="col">Held by</th>
          <th scope="col">Phase</th>
          <th scope="col">Why</th>
        </tr>
      </thead>
      <tbody>
        {ports.map((p) => (
          <tr data-port={p.port} data-network={p.network}>
            <th scope="row">{p.port}</th>
            <td>{NETWORK_LABELS[p.network](p.group)}</td>
            <td>
              {p.host && p.network === 'tenant' ? (
                <a href={`/ui/hosts/${encodeURIComponent(p.host)}`}>{p.host}</a>
              ) : (
                (p.host ?? '')
              )}
            </td>
            <td>{p.phase ? <Phase phase={p.phase} object={`host/${p.host}`} /> : ''}</td>
            <td>{p.reason ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

const NETWORK_LABELS: Record<
  NonNullable<DpuView['ports']>[number]['network'],
  (group?: string) => string
> = {
  admin: (group) => `admin network (${group ?? ''})`,
  tenant: (group) => `tenant group ${group ?? ''}`,
  none: () => 'none (isolated)',
}

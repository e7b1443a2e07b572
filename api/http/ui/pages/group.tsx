/**
 * `/ui/groups/:name`: a group's spec and status, its topology picture, its hosts, its
 * address map and its events; re-drive when it is Failed.
 */
import type { NetworkUsage } from '../../../../lib/ipam/index.ts'
import type { ObjectEvent } from '../../../../lib/model/events.ts'
import type { ManagedResource, ResourceGroup } from '../../../../lib/model/objects.ts'
import { IpamMap } from '../ipam-map.tsx'
import { ConditionsTable, EventsTable, Facts, type Frame, Layout, Phase } from '../layout.tsx'
import { groupPhase } from '../phase.ts'
import { type TopologyModel, TopologySvg } from '../topology.tsx'
import { HostsTable } from './overview.tsx'

export interface GroupData {
  readonly group: ResourceGroup
  readonly hosts: readonly ManagedResource[]
  readonly moreHosts: boolean
  readonly topology: TopologyModel
  /** The map, or why there is none (the network is not made yet). */
  readonly ipam: NetworkUsage | { readonly unavailable: string }
  readonly events: readonly ObjectEvent[]
}

export function GroupPage(props: { frame: Frame; data: GroupData }) {
  const { group, hosts, topology, ipam, events } = props.data
  const phase = groupPhase(group)
  const object = `group/${group.name}`
  return (
    <Layout title={`Group ${group.name}`} frame={props.frame} page="group" live>
      <h1>
        {`Group ${group.name} `}
        <Phase phase={phase} object={object} />
      </h1>
      <div id="group-facts" data-refresh>
        <Facts
          facts={[
            ['Tenant', group.spec.tenantId],
            [
              'Network',
              group.spec.network ? (
                <span class="mono">{`${group.spec.network.cidr} (gateway ${group.spec.network.gateway})`}</span>
              ) : (
                'none (IPv6 only)'
              ),
            ],
            [
              'IPv6 network',
              group.spec.network6 ? (
                <span class="mono">{`${group.spec.network6.cidr} (gateway ${group.spec.network6.gateway}, SLAAC)`}</span>
              ) : (
                ''
              ),
            ],
            ['Extra subnets', (group.spec.extraSubnets ?? []).map((s) => s.cidr).join(', ')],
            [
              'Spec version',
              `${group.specVersion} (observed ${group.status.observedVersion}${group.status.attempt ? `, attempt ${group.status.attempt}` : ''})`,
            ],
            ['Configs synced', group.status.configsSynced ? 'yes' : 'no'],
            ['SNAT IPs', group.status.snatIPs.join(', ')],
            [
              'OVN central',
              group.status.ovnCentral?.nb ??
                (group.status.conditions.some(
                  (c) => c.type === 'CentralRunning' && c.status === 'False',
                )
                  ? 'not running (no hosts; its first host starts it)'
                  : undefined),
            ],
            [
              'Deletion',
              group.deletion
                ? `asked ${group.deletion.requestedAt}${group.deletion.force ? ' (forced)' : ''}`
                : '',
            ],
          ]}
        />
      </div>
      {group.status.phase === 'Failed' && !group.deletion ? (
        <div class="actions">
          <a class="button" href={`/ui/groups/${encodeURIComponent(group.name)}/redrive`}>
            Re-drive this group…
          </a>
        </div>
      ) : null}

      <h2 id="topology">Topology</h2>
      <figure class="topology" aria-labelledby="topology" id="group-topology" data-refresh>
        <TopologySvg model={topology} />
      </figure>

      <h2 id="hosts">Hosts</h2>
      <div id="group-hosts" data-refresh>
        {props.data.moreHosts ? (
          <p class="notice">{`Showing the first ${hosts.length} hosts.`}</p>
        ) : null}
        {hosts.length === 0 ? (
          <p>No hosts in this group.</p>
        ) : (
          <HostsTable hosts={hosts} labelledBy="hosts" showGroup={false} />
        )}
      </div>
      <h2 id="conditions">Conditions</h2>
      <div id="group-conditions" data-refresh>
        <ConditionsTable conditions={group.status.conditions} />
      </div>

      <h2 id="ipam">Address map</h2>
      <div id="group-ipam" data-refresh>
        {'unavailable' in ipam ? <p>{ipam.unavailable}</p> : <IpamMap usage={ipam} />}
      </div>

      <h2 id="events">Events</h2>
      <div id="group-events" data-refresh>
        <EventsTable events={events} label={`Events of group ${group.name}`} />
      </div>
    </Layout>
  )
}

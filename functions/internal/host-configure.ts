/**
 * A host's `configure` on its DPU, both ends of it: the request, built from the host and
 * its group (its logical port, MAC and host port; the group's SB and DHCP relay), and the
 * `AgentConfigured` condition the DPU's ack earns, as far as the Southbound bears it out.
 * Pure.
 */

import type { ConfigureAck, ConfigureInput } from '../../lib/agent-protocol/index.ts'
import { groupSubnets, primaryNetwork } from '../../lib/model/group-network.ts'
import { cidrContains, type ManagedResource, type ResourceGroup } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { optionalHostPort } from './host-port.ts'
import { relayMacOf, relayPortNameOf } from './network.ts'

/** What the request needs beyond the host and group objects. */
export interface ConfigureContext {
  /** The SB remote the DPU's ovn-controller follows. */
  readonly sbRemote: string
  /** The certificate the DPU presents to that SB, when its identity is not enough. */
  readonly sbCertificate?: string | undefined
  /** The CA the DPU trusts for that SB, when it is the group's own. */
  readonly sbCa?: string | undefined
  /** The group's relay address on the DPU, when it has one. */
  readonly relayIp: string | undefined
  /** The group's relay id (`StateStore.groups.relayIdOf`), when it relays DHCP. */
  readonly relayId: number | undefined
  /** The DPU runs IPsec on its Geneve tunnels (`HYDRAZINE_GENEVE_IPSEC`). */
  readonly geneveIpsec?: boolean | undefined
}

/** The `configure` request for the host at its current spec version. */
export function configureRequestOf(
  host: ManagedResource,
  group: ResourceGroup,
  { sbRemote, sbCertificate, sbCa, relayIp, relayId, geneveIpsec }: ConfigureContext,
): ConfigureInput {
  const { spec } = host
  const dpuId = spec.dpu.id
  return {
    dpuId,
    specVersion: host.specVersion,
    group: {
      name: group.name,
      sbRemote,
      ...(sbCertificate ? { sbCertificate } : {}),
      ...(sbCa ? { sbCa } : {}),
      ...(geneveIpsec ? { geneveIpsec: true } : {}),
      ...(group.spec.dhcpServer
        ? {
            dhcpServer: group.spec.dhcpServer,
            relay: {
              logicalPort: topologyNames.relayPort(group.name, dpuId),
              mac: relayMacOf(group.name, dpuId),
              // Its circuit id: unique for ever, unlike a hash of the group's name.
              ...(relayId !== undefined ? { portName: relayPortNameOf(relayId) } : {}),
              ...(relayIp
                ? {
                    ip: relayIp,
                    prefixLength: prefixLengthOf(group, relayIp),
                  }
                : {}),
            },
          }
        : {}),
    },
    host: {
      name: host.name,
      logicalPort: topologyNames.hostPort(group.name, host.name),
      mac: spec.hostMAC,
      ...optionalHostPort(spec),
    },
  }
}

/**
 * The `AgentConfigured` condition: the DPU's ack, as far as the Southbound bears it out;
 * with `geneveIpsec` (the DPU was asked for IPsec on its tunnels), False until the ack
 * says OVS has its IPsec certificate (an older agent never does: its tunnels would stay
 * cleartext, or carry nothing to peers that take only IPsec).
 */
export function agentConfigured(
  ack: Pick<ConfigureAck, 'ovnInstalled' | 'hostPort' | 'relayPort' | 'geneveIpsec'>,
  bound: boolean,
  dpuId: string,
  logicalPort: string,
  geneveIpsec = false,
) {
  const relay = ack.relayPort ? ` and relay ${ack.relayPort}` : ''
  if (geneveIpsec && ack.geneveIpsec !== true) {
    return {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'GeneveIpsecNotConfigured',
      message: `DPU ${dpuId} was asked for IPsec on its Geneve tunnels and did not configure it (an agent older than HYDRAZINE_GENEVE_IPSEC?)`,
    } as const
  }
  if (!ack.ovnInstalled) {
    return {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'PortNotInstalled',
      message: `DPU ${dpuId} bound ${ack.hostPort}${relay} to ${logicalPort}; ovn-controller has not installed it`,
    } as const
  }
  if (!bound) {
    return {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'NotBoundInSouthbound',
      message: `DPU ${dpuId} acked ${logicalPort}, but the Southbound does not bind it to chassis ${dpuId}`,
    } as const
  }
  return {
    type: 'AgentConfigured',
    status: 'True',
    reason: 'PortInstalled',
    message: `DPU ${dpuId} bound ${ack.hostPort}${relay} to ${logicalPort}`,
  } as const
}

/** The prefix length of the group subnet that holds `ip` (the primary one's if none does). */
function prefixLengthOf(group: ResourceGroup, ip: string): number {
  const cidr =
    groupSubnets(group.spec).find((s) => cidrContains(s.cidr, ip))?.cidr ??
    primaryNetwork(group.spec).cidr
  return Number(cidr.split('/')[1] ?? 32)
}

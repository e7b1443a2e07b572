/**
 * A group's topology as a picture (SVG), the way it is built in OVN (`lib/ovn/topology`):
 * the group's distributed logical switch and router, one gateway router per DPU that
 * serves one of its hosts (named as in NB, with the DPU's NAT IP and the public and
 * fabric IPs it DNATs), and each host under its DPU with its address and phase.
 *
 * Two pure steps: `topologyModel` decides what is drawn and where; `TopologySvg` draws it.
 * Colour follows phase or DPU state (`assets.ts`), always beside the word itself; each
 * node has a `<title>` and stable `data-kind` / `data-dpu` / `data-host` attributes.
 *
 * @example
 * <TopologySvg model={topologyModel(group, hosts, dpus)} />
 */

import type { DpuView } from '../../../app/index.ts'
import type { ManagedResource, ResourceGroup } from '../../../lib/model/objects.ts'
import { topologyNames } from '../../../lib/ovn/index.ts'
import { groupPhase, hostPhase } from './phase.ts'

export interface TopologyHost {
  readonly name: string
  readonly ip?: string
  readonly phase: string
  readonly access: string
  readonly publicIp?: string
  readonly fabricIp?: string
}

/** One NAT rule of a gateway router, as drawn: what the outside sees, and for whom. */
export interface TopologyNat {
  readonly type: 'snat' | 'dnat' | 'dnat_and_snat'
  readonly external: string
  /** The host's address, or the group's network for its SNAT. */
  readonly logical: string
  readonly host?: string
}

export interface TopologyGateway {
  readonly dpu: string
  /** The gateway router's NB name. */
  readonly router: string
  readonly state: string
  readonly natIp?: string
  readonly nats: readonly TopologyNat[]
  readonly hosts: readonly TopologyHost[]
}

export interface TopologyModel {
  readonly group: string
  readonly phase: string
  readonly switch: { readonly name: string; readonly cidrs: readonly string[] }
  readonly router: { readonly name: string; readonly gateways: readonly string[] }
  /** By DPU id. */
  readonly gateways: readonly TopologyGateway[]
}

/**
 * What the picture shows: every host of the group grouped by its DPU (DPUs by id, hosts
 * by name), and a gateway router per such DPU with the NAT rules the compiler gives it
 * (`lib/ovn/topology/parts.ts`): SNAT of each routed IPv4 subnet to the DPU's NAT IP; a
 * FabricAccess host's `dnat_and_snat` NAT IP ↔ host; a PublicAccess host's
 * `dnat_and_snat` public IP ↔ host and `dnat` NAT IP → host.
 */
export function topologyModel(
  group: ResourceGroup,
  hosts: readonly ManagedResource[],
  dpus: readonly Pick<DpuView, 'id' | 'state'>[],
): TopologyModel {
  const stateOf = new Map(dpus.map((d) => [d.id, d.state]))
  const byDpu = new Map<string, ManagedResource[]>()
  for (const host of hosts) {
    if (host.spec.resourceGroup !== group.name) continue
    const list = byDpu.get(host.spec.dpu.id) ?? []
    list.push(host)
    byDpu.set(host.spec.dpu.id, list)
  }
  const subnets = [
    ...(group.spec.network ? [group.spec.network] : []),
    ...(group.spec.extraSubnets ?? []),
  ]
  const routedV4 = subnets.flatMap((s) => (s.gateway && !s.cidr.includes(':') ? [s.cidr] : []))
  const gateways = [...byDpu.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([dpu, members]): TopologyGateway => {
      const sorted = [...members].sort((a, b) => a.name.localeCompare(b.name))
      const drawn = sorted.map(topologyHost)
      const natIp = sorted.map((h) => h.spec.dpu.ips[1]).find((ip) => ip !== undefined)
      const nats: TopologyNat[] = []
      if (natIp) {
        for (const cidr of routedV4) nats.push({ type: 'snat', external: natIp, logical: cidr })
      }
      for (const h of drawn) {
        if (!h.ip || !natIp || h.access === 'None') continue
        if (h.access === 'FabricAccess') {
          nats.push({ type: 'dnat_and_snat', external: natIp, logical: h.ip, host: h.name })
          continue
        }
        if (h.publicIp) {
          nats.push({ type: 'dnat_and_snat', external: h.publicIp, logical: h.ip, host: h.name })
        }
        nats.push({ type: 'dnat', external: natIp, logical: h.ip, host: h.name })
      }
      return {
        dpu,
        router: topologyNames.gatewayRouter(group.name, dpu),
        state: stateOf.get(dpu) ?? 'Unknown',
        ...(natIp ? { natIp } : {}),
        nats,
        hosts: drawn,
      }
    })
  return {
    group: group.name,
    phase: groupPhase(group),
    switch: { name: topologyNames.switch(group.name), cidrs: subnets.map((s) => s.cidr) },
    router: {
      name: topologyNames.router(group.name),
      gateways: subnets.flatMap((s) => (s.gateway ? [s.gateway] : [])),
    },
    gateways,
  }
}

function topologyHost(host: ManagedResource): TopologyHost {
  const ips = host.status.hostAccessIPs
  const ip = ips?.hostIP ?? host.spec.hostIP
  return {
    name: host.name,
    ...(ip ? { ip } : {}),
    phase: hostPhase(host),
    access: host.spec.hostAccess,
    ...(ips?.publicIP ? { publicIp: ips.publicIP } : {}),
    ...(ips?.fabricIP ? { fabricIp: ips.fabricIP } : {}),
  }
}

/** Where things go, in SVG user units. */
const LAYOUT = {
  margin: 20,
  column: 300,
  box: 280,
  line: 15,
  host: 58,
  gap: 40,
  minWidth: 760,
} as const

/** The picture's size and each row's top, for a model. */
export function topologyLayout(model: TopologyModel) {
  const { margin, column, line, host, gap, minWidth } = LAYOUT
  const columns = Math.max(1, model.gateways.length)
  const width = Math.max(minWidth, margin * 2 + columns * column)
  const gatewayHeight = 46 + line * Math.max(0, ...model.gateways.map((g) => g.nats.length))
  const gatewayTop = margin + 22
  const routerTop = gatewayTop + gatewayHeight + gap
  const routerHeight = 46
  const switchTop = routerTop + routerHeight + gap
  const switchHeight = 46
  const hostsTop = switchTop + switchHeight + gap
  const mostHosts = Math.max(0, ...model.gateways.map((g) => g.hosts.length))
  const height = hostsTop + Math.max(1, mostHosts) * host + margin
  const columnLeft = (i: number) =>
    (width - columns * column) / 2 + i * column + (column - LAYOUT.box) / 2
  return {
    width,
    height,
    gatewayTop,
    gatewayHeight,
    routerTop,
    routerHeight,
    switchTop,
    switchHeight,
    hostsTop,
    columnLeft,
  }
}

const NAT_WORD = { snat: 'SNAT', dnat: 'DNAT', dnat_and_snat: 'NAT' } as const

const natLine = (n: TopologyNat) =>
  n.type === 'snat'
    ? `SNAT ${n.logical} → ${n.external}`
    : `${NAT_WORD[n.type]} ${n.external} ${n.type === 'dnat' ? '→' : '↔'} ${n.logical}${n.host ? ` (${n.host})` : ''}`

/** The group's topology picture. */
export function TopologySvg(props: { model: TopologyModel }) {
  const { model } = props
  const l = topologyLayout(model)
  const { box } = LAYOUT
  const center = l.width / 2
  const routerWidth = 300
  const titleId = `topology-${model.group}-title`
  return (
    <svg
      xmlns="http://www.w3.org/2000/svg"
      viewBox={`0 0 ${l.width} ${l.height}`}
      width={l.width}
      height={l.height}
      aria-labelledby={titleId}
      data-group={model.group}
    >
      <title id={titleId}>
        {`Topology of group ${model.group}: switch, router, ${model.gateways.length} gateway router(s), ${model.gateways.reduce((n, g) => n + g.hosts.length, 0)} host(s)`}
      </title>
      {model.gateways.map((_, i) => {
        const x = l.columnLeft(i) + box / 2
        return (
          <line
            class="link"
            x1={x}
            y1={l.gatewayTop + l.gatewayHeight}
            x2={center}
            y2={l.routerTop}
          />
        )
      })}
      <line
        class="link"
        x1={center}
        y1={l.routerTop + l.routerHeight}
        x2={center}
        y2={l.switchTop}
      />
      {model.gateways.flatMap((g, i) =>
        g.hosts.map((_, j) => {
          const x = l.columnLeft(i) + 24
          const y = l.hostsTop + j * LAYOUT.host
          return (
            <polyline
              class="link"
              points={`${x},${l.switchTop + l.switchHeight} ${x},${y + 22} ${x + 12},${y + 22}`}
            />
          )
        }),
      )}

      {model.gateways.map((g, i) => {
        const x = l.columnLeft(i)
        const title = `Gateway router ${g.router} on DPU ${g.dpu} (${g.state})${g.natIp ? `, NAT IP ${g.natIp}` : ''}${g.nats.length ? `; ${g.nats.map(natLine).join('; ')}` : ''}`
        return (
          <g
            id={`topology-gw-${g.dpu}`}
            data-kind="gateway-router"
            data-dpu={g.dpu}
            data-phase={g.state}
          >
            <title>{title}</title>
            <rect class="node" x={x} y={l.gatewayTop} width={box} height={l.gatewayHeight} rx="6" />
            <text class="name" x={x + 10} y={l.gatewayTop + 17}>
              {`DPU ${g.dpu} · `}
              <tspan class="phase-text">{g.state}</tspan>
            </text>
            <text class="small mono" x={x + 10} y={l.gatewayTop + 33}>
              {g.router}
            </text>
            {g.nats.map((n, k) => (
              <text
                class="small"
                x={x + 10}
                y={l.gatewayTop + 48 + k * LAYOUT.line}
                data-nat={n.type}
                data-external={n.external}
              >
                {natLine(n)}
              </text>
            ))}
          </g>
        )
      })}
      {model.gateways.length === 0 ? (
        <text x={center} y={l.gatewayTop + 24} text-anchor="middle" class="small">
          No hosts yet: no gateway router
        </text>
      ) : null}

      <g data-kind="router" data-object={`group/${model.group}`} data-phase={model.phase}>
        <title>{`Logical router ${model.router.name}: gateway ${model.router.gateways.join(', ')}`}</title>
        <rect
          class="node"
          x={center - routerWidth / 2}
          y={l.routerTop}
          width={routerWidth}
          height={l.routerHeight}
          rx="6"
        />
        <text class="name" x={center} y={l.routerTop + 18} text-anchor="middle">
          {`Router ${model.router.name}`}
        </text>
        <text class="small" x={center} y={l.routerTop + 35} text-anchor="middle">
          {`gateway ${model.router.gateways.join(', ')}`}
        </text>
      </g>

      <g data-kind="switch" data-object={`group/${model.group}`} data-phase={model.phase}>
        <title>{`Logical switch ${model.switch.name}: ${model.switch.cidrs.join(', ')}`}</title>
        <rect
          class="node"
          x={LAYOUT.margin}
          y={l.switchTop}
          width={l.width - 2 * LAYOUT.margin}
          height={l.switchHeight}
          rx="6"
        />
        <text class="name" x={center} y={l.switchTop + 18} text-anchor="middle">
          {`Switch ${model.switch.name} · `}
          <tspan class="phase-text">{model.phase}</tspan>
        </text>
        <text class="small" x={center} y={l.switchTop + 35} text-anchor="middle">
          {model.switch.cidrs.join(', ')}
        </text>
      </g>

      {model.gateways.flatMap((g, i) =>
        g.hosts.map((h, j) => {
          const x = l.columnLeft(i) + 36
          const y = l.hostsTop + j * LAYOUT.host
          const width = box - 36
          return (
            <a href={`/ui/hosts/${encodeURIComponent(h.name)}`}>
              <g
                data-kind="host"
                data-host={h.name}
                data-dpu={g.dpu}
                data-object={`host/${h.name}`}
                data-phase={h.phase}
              >
                <title>{`Host ${h.name} on DPU ${g.dpu}: ${h.ip ?? 'no address yet'}, ${h.phase}${h.publicIp ? `, public IP ${h.publicIp}` : ''}`}</title>
                <rect class="node" x={x} y={y} width={width} height={LAYOUT.host - 12} rx="6" />
                <text class="name" x={x + 8} y={y + 17}>
                  {h.name}
                </text>
                <text class="small phase-text" x={x + width - 8} y={y + 17} text-anchor="end">
                  {h.phase}
                </text>
                <text class="small" x={x + 8} y={y + 35}>
                  {`${h.ip ?? 'no address yet'}${h.publicIp ? ` · public ${h.publicIp}` : ''}`}
                </text>
              </g>
            </a>
          )
        }),
      )}
    </svg>
  )
}

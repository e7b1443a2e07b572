/**
 * `HydrazineClient.trace`: "why can't A reach B". Builds the packet a host would send
 * (its port, MAC and address; the destination's MAC on its own subnet, else its router's)
 * and runs `ovn-trace` against the central of the host's own group — so an address other
 * groups also use is always the source group's — then says where the packet ends up.
 * Inbound (`from: 'fabric'`) starts at the localnet port of the DPU that owns a public or
 * NAT IP and, since ovn-trace (OVN 23.03) stops at the gateway router's un-SNAT, goes on
 * from the router's DNAT target. Reads only: nothing is written to NB or SB.
 */
import { isIP } from 'node:net'
import * as v from 'valibot'
import { HydrazineError } from '../lib/errors.ts'
import { canonicalIp } from '../lib/ipam/address.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import { groupSubnets } from '../lib/model/group-network.ts'
import { Rfc1123Label } from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import {
  arpRequest,
  describeDatapath,
  dnatTargetOf,
  type Explained,
  explain,
  finalOutputs,
  microflow,
  topologyNames as names,
  type OvnCentralEndpoints,
  type OvnCentralProvider,
  type OvnTrace,
  onLink,
  parseTrace,
  snatSourceOf,
  TRACE_TTL,
  type TraceFacts,
  TraceUnavailable,
} from '../lib/ovn/index.ts'
import type { StateStore } from '../lib/state/store.ts'
import { validate } from './errors.ts'
import { outcomeOf, summaryOf, type TraceAnswer, type TraceRun } from './trace-answer.ts'
import { outboundNotes, ownerOf, reachableAddress, type Visible } from './trace-lookup.ts'

export type { TraceAnswer } from './trace-answer.ts'
export { TraceUnavailable }

/** `from` of an inbound trace: a packet from the fabric. */
export const FABRIC = 'fabric'
/**
 * The fabric addresses and MAC an inbound trace's packet comes from (TEST-NET-2, and the
 * IPv6 documentation prefix): `ip` to an IPv4 address, `ip6` to an IPv6 one.
 */
export const FABRIC_SOURCE = {
  ip: '198.51.100.1',
  ip6: '2001:db8:ffff::1',
  mac: '02:00:00:00:00:01',
} as const

/** What may be traced: `from` a host (or `fabric`) `to` a host or an address. */
export const TraceRequest = v.pipe(
  v.strictObject({
    from: v.pipe(
      v.string(),
      v.check(
        (s) => s === FABRIC || v.is(Rfc1123Label, s),
        'must be a host (managed resource) name, or fabric',
      ),
    ),
    to: v.pipe(
      v.string(),
      v.check(
        (s) => (isIP(s) !== 0 && !s.includes('%')) || v.is(Rfc1123Label, s),
        'must be a host (managed resource) name or an IP address',
      ),
      // Any spelling of an address is the same one.
      v.transform((s) => (isIP(s) === 0 ? s : canonicalIp(s))),
    ),
    proto: v.optional(v.picklist(['icmp', 'tcp', 'udp'], 'must be icmp, tcp or udp')),
    port: v.optional(
      v.pipe(
        v.number(),
        v.integer('must be an integer from 1 to 65535'),
        v.minValue(1, 'must be an integer from 1 to 65535'),
        v.maxValue(65535, 'must be an integer from 1 to 65535'),
      ),
    ),
    raw: v.optional(v.boolean()),
  }),
  v.forward(
    v.check(
      (r) => r.port === undefined || r.proto === 'tcp' || r.proto === 'udp',
      'is only for proto=tcp or proto=udp',
    ),
    ['port'],
  ),
  v.forward(
    v.check(
      (r) => (r.proto !== 'tcp' && r.proto !== 'udp') || r.port !== undefined,
      'is required with proto=tcp or proto=udp',
    ),
    ['port'],
  ),
  v.forward(
    v.check(
      (r) => r.from !== FABRIC || isIP(r.to) !== 0,
      'with from=fabric, must be a public IP or NAT IP (IPv4 or IPv6)',
    ),
    ['to'],
  ),
)
export type TraceRequest = v.InferOutput<typeof TraceRequest>

/** The host is not one this caller may trace (missing, or another tenant's): 404. */
export class TraceUnknownHost extends HydrazineError {
  constructor(
    readonly host: string,
    readonly field: string,
  ) {
    super('TRACE_UNKNOWN_HOST', `${field}: host ${host} does not exist`)
  }
}

/** No host this caller may trace owns the address (inbound): 404. */
export class TraceUnknownAddress extends HydrazineError {
  constructor(readonly address: string) {
    super('TRACE_UNKNOWN_ADDRESS', `to: no host owns ${address} as its public IP or NAT IP`)
  }
}

/** The host has no logical port to trace from yet (attaching), or is being detached: 409. */
export class TraceNotAttached extends HydrazineError {
  constructor(
    readonly host: string,
    why: string,
  ) {
    super('TRACE_NOT_ATTACHED', `host ${host} cannot be traced: ${why}`)
  }
}

/** What the tracer needs: the store, the pool, each group's central, and ovn-trace. */
export interface TracerDeps {
  readonly store: Pick<StateStore, 'hosts' | 'groups' | 'dpus'>
  readonly ipam: Pick<Ipam, 'listPublicIps'>
  readonly ovn: Pick<OvnCentralProvider, 'ensure'>
  /** Read-only lookups of a central (its NB and SB, over shared connections). */
  readonly facts: (central: OvnCentralEndpoints) => Promise<TraceFacts>
  readonly ovnTrace: OvnTrace
}

export interface Tracer {
  /** Validates `request` (a ValidationError names each bad field) and traces it. */
  trace(request: unknown, caller: Caller): Promise<TraceAnswer>
}

/**
 * @example
 * const tracer = createTracer({ store, ipam, ovn, facts, ovnTrace: createOvnTrace() })
 * await tracer.trace({ from: 'h1', to: 'h2' }, { kind: 'operator' }) // { verdict: 'delivered', … }
 */
export function createTracer(deps: TracerDeps): Tracer {
  const central = async (group: string) => {
    try {
      const endpoints = await deps.ovn.ensure(group)
      return { endpoints, facts: await deps.facts(endpoints) }
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error)
      throw new TraceUnavailable(`the OVN central of group ${group} does not answer: ${why}`, {
        cause: error,
      })
    }
  }
  /** Runs one trace and keeps its record. */
  const run = async (
    runs: TraceRun[],
    endpoints: OvnCentralEndpoints,
    datapath: string,
    flow: string,
    raw: boolean,
  ) => {
    const text = await deps.ovnTrace(endpoints.sbController, datapath, flow)
    runs.push({ central: endpoints.service, datapath, flow, ...(raw ? { raw: text } : {}) })
    return parseTrace(text)
  }

  const visibleTo = (caller: Caller): Visible => {
    return async (host) => {
      if (caller.kind === 'operator') return true
      const group = await deps.store.groups.get(host.spec.resourceGroup)
      return group?.spec.tenantId === caller.tenant
    }
  }

  const attached = async (name: string, field: string, visible: Visible) => {
    const host = await deps.store.hosts.get(name)
    if (!host || !(await visible(host))) throw new TraceUnknownHost(name, field)
    if (host.deletion) throw new TraceNotAttached(name, 'it is being detached')
    const port = host.status.logicalPortReference?.logicalPort
    const ip = host.status.hostAccessIPs?.hostIP
    if (!port || !ip) {
      throw new TraceNotAttached(name, `it has no logical port yet (${host.status.phase})`)
    }
    const ip6 = host.status.hostAccessIPs?.hostIPv6
    return { host, port, ip, ...(ip6 ? { ip6 } : {}) }
  }

  async function outbound(req: TraceRequest, caller: Caller): Promise<TraceAnswer> {
    const visible = visibleTo(caller)
    const src = await attached(req.from, 'from', visible)
    const g = src.host.spec.resourceGroup
    const group = await deps.store.groups.get(g)
    if (!group) throw new TraceNotAttached(src.host.name, `its group ${g} does not exist`)
    const named = isIP(req.to) ? undefined : await attached(req.to, 'to', visible)
    const address = named ? reachableAddress(named, g) : req.to
    // A dual-stack host sends to an IPv6 address from its SLAAC one.
    const srcIp = isIP(address) === 6 && src.ip6 ? src.ip6 : src.ip
    validate(
      v.pipe(
        v.string(),
        v.check((a) => isIP(a) === isIP(srcIp), `is not of the address family of ${srcIp}`),
        v.check((a) => a !== srcIp, `is ${src.host.name}'s own address`),
      ),
      address,
      'to',
    )
    const { endpoints, facts } = await central(g)
    const port = await facts.port(src.port)
    if (!port) throw new TraceNotAttached(src.host.name, 'its port is not in its central yet')
    const subnets = groupSubnets(group.spec).map((s) => s.cidr)
    const runs: TraceRun[] = []
    const raw = req.raw ?? false
    const mac = src.host.spec.hostMAC

    /** The packet itself, sent to `ethDst` (the destination's MAC, or its router's). */
    const packet = async (ethDst: string): Promise<Explained> => {
      const flow = microflow({
        inport: src.port,
        ethSrc: mac,
        ethDst,
        ipSrc: srcIp,
        ipDst: address,
        ...(req.proto ? { proto: req.proto } : {}),
        ...(req.port !== undefined ? { port: req.port } : {}),
      })
      const explained = explain(await run(runs, endpoints, port.datapath, flow, raw))
      const { verdict } = explained
      if (verdict.verdict !== 'leaves' || verdict.source || !verdict.dpu) return explained
      // Sent after an ARP, the packet's own SNAT is not in the trace: the NAT rules say it.
      const source = snatSourceOf(await facts.natRules(g, verdict.dpu), srcIp) ?? srcIp
      return { ...explained, verdict: { ...verdict, source } }
    }
    /** Nothing on the host's subnet has the address: the host only ever asks for it. */
    const unanswered = async (): Promise<Explained> => {
      const unresolved = {
        verdict: 'unresolved',
        target: address,
        datapath: port.datapath,
      } as const
      if (isIP(address) !== 4) {
        const hops = [`${describeDatapath(port.datapath)}: no port has ${address}`]
        return { verdict: { ...unresolved, reached: [] }, hops }
      }
      const arp = arpRequest({ inport: src.port, mac, ip: srcIp, target: address })
      const trace = await run(runs, endpoints, port.datapath, arp, raw)
      const reached = finalOutputs(trace).map((o) => o.port)
      return { verdict: { ...unresolved, reached }, hops: explain(trace).hops }
    }

    const router = (await facts.port(names.routerSwitchPort(g)))?.addresses ?? []
    const routerMac = router[0]?.mac
    if (!routerMac) throw new TraceUnavailable(`group ${g}'s router is not in its central yet`)
    let result: Explained
    if (!onLink(srcIp, address, subnets)) {
      result = await packet(routerMac)
    } else {
      // On its own subnet the host asks for the MAC itself: a host's, or the router's.
      const holder =
        router.find((a) => a.ips.includes(address)) ??
        (await facts.holdersOf(port.datapath, address)).find((h) => h.port !== src.port)
      result = holder ? await packet(holder.mac) : await unanswered()
    }
    const { verdict, hops } = result
    const notes = await outboundNotes(deps.store, caller, {
      group,
      address,
      subnets,
      port,
      host: src.host.name,
    })
    const to = named ? { host: named.host.name, group: named.host.spec.resourceGroup } : {}
    return {
      ...outcomeOf(verdict),
      summary: summaryOf(`${src.host.name} (${srcIp})`, address, verdict),
      from: {
        host: src.host.name,
        group: g,
        port: src.port,
        mac,
        ip: srcIp,
        dpu: src.host.spec.dpu.id,
        boundTo: port.chassis,
      },
      to: { ip: address, ...to },
      hops,
      notes,
      traces: runs,
    }
  }

  async function inbound(req: TraceRequest, caller: Caller): Promise<TraceAnswer> {
    const address = req.to
    const family = isIP(address) === 6 ? 6 : 4
    const source = family === 6 ? FABRIC_SOURCE.ip6 : FABRIC_SOURCE.ip
    const owner = await ownerOf(deps, address, visibleTo(caller))
    if (!owner) throw new TraceUnknownAddress(address)
    const g = owner.spec.resourceGroup
    const dpu = owner.spec.dpu.id
    const { endpoints, facts } = await central(g)
    const macOf = async (port: string) => {
      const mac = (await facts.port(port))?.addresses[0]?.mac
      if (!mac) throw new TraceUnavailable(`port ${port} is not in group ${g}'s central yet`)
      return mac
    }
    const packet = (inport: string, ethSrc: string, ethDst: string, ipDst: string, ttl?: number) =>
      microflow({
        inport,
        ethSrc,
        ethDst,
        ipSrc: source,
        ipDst,
        ...(ttl ? { ttl } : {}),
        ...(req.proto ? { proto: req.proto } : {}),
        ...(req.port !== undefined ? { port: req.port } : {}),
      })
    const runs: TraceRun[] = []
    const raw = req.raw ?? false
    const localnet = names.localnetPort(g, dpu)
    const gatewayMac = await macOf(names.gatewayPublicPort(g, dpu))
    const inward = packet(localnet, FABRIC_SOURCE.mac, gatewayMac, address)
    const first = await run(runs, endpoints, names.publicSwitch(g, dpu), inward, raw)
    let { verdict, hops } = explain(first)
    // ovn-trace stops at the gateway router's un-SNAT: go on from its DNAT target.
    if (first.stoppedAt?.action === 'ct_snat') {
      const gateway = names.gatewayRouter(g, dpu)
      const target = dnatTargetOf(await facts.natRules(g, dpu), address)
      if (!target) {
        verdict = {
          verdict: 'dropped',
          datapath: gateway,
          stage: 'lr_in_dnat',
          match: `ip${family}.dst == ${address}`,
          reason: `no DNAT rule takes ${address} in: only replies to traffic SNATed to it come back`,
        }
      } else {
        const onward = packet(
          names.transitGatewayPort(g, dpu),
          await macOf(names.gatewayTransitPort(g, dpu)),
          await macOf(names.routerTransitPort(g, dpu)),
          target,
          TRACE_TTL - 1,
        )
        const second = explain(await run(runs, endpoints, names.transitSwitch(g, dpu), onward, raw))
        verdict = second.verdict
        hops = [
          ...hops.slice(0, -1),
          `${describeDatapath(gateway)}: the destination becomes ${target} (DNAT: its NAT rule for ${address})`,
          ...second.hops,
        ]
      }
    }
    return {
      ...outcomeOf(verdict),
      summary: summaryOf(`a packet from the fabric (${source})`, address, verdict),
      from: { fabric: true, ip: source, dpu, port: localnet },
      to: { ip: address, host: owner.name, group: g },
      hops,
      notes: [`${address} belongs to host ${owner.name} of group ${g}, on DPU ${dpu}`],
      traces: runs,
    }
  }

  return {
    async trace(request, caller) {
      const req = validate(TraceRequest, request)
      return req.from === FABRIC ? inbound(req, caller) : outbound(req, caller)
    },
  }
}

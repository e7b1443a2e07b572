/**
 * What a parsed `ovn-trace` says, in a group topology's own words: a verdict (where the
 * packet ends up) and the hops it takes, each as a sentence naming hosts and DPUs rather
 * than logical ports. Pure.
 *
 * @example
 * explain(parseTrace(stdout))
 * // { verdict: { verdict: 'delivered', port: 'hz/g/h2', host: 'h2', group: 'g' },
 * //   hops: ['group g network (hz/g/ls): host h1 port → host h2 port'] }
 */
import { parseTopologyName } from '../topology/names.ts'
import { finalOutputs, type ParsedTrace, type TraceSection } from './parse.ts'

/** Where the traced packet ends up. */
export type TraceVerdict =
  | {
      /** It reaches a VIF: a host's port (`host`) or another endpoint such as a relay. */
      readonly verdict: 'delivered'
      readonly port: string
      readonly host?: string
      readonly group?: string
    }
  | {
      /** A router answers it itself (an echo request to its address). */
      readonly verdict: 'answered'
      readonly router: string
    }
  | {
      readonly verdict: 'dropped'
      readonly datapath: string
      /** `<table>. <stage name>`, e.g. `13. lr_in_ip_routing`. */
      readonly stage: string
      readonly match: string
      readonly reason: string
    }
  | {
      /** It leaves the logical network through a DPU's localnet port (to the fabric). */
      readonly verdict: 'leaves'
      readonly port: string
      readonly dpu?: string
      /** The source address after SNAT, when the trace shows it. */
      readonly source?: string
      /**
       * The gateway router does not know its next hop's MAC yet: this ARP request leaves
       * first, and the packet follows once it is answered.
       */
      readonly arp?: { readonly target: string; readonly port: string }
    }
  | {
      /** A router asks for a MAC nothing answers on the logical network. */
      readonly verdict: 'unresolved'
      readonly target: string
      readonly datapath: string
      readonly reached: readonly string[]
    }
  | {
      /** ovn-trace stopped at an action it does not follow. */
      readonly verdict: 'inconclusive'
      readonly datapath: string
      readonly stage: string
      readonly action: string
    }

export interface Explained {
  readonly verdict: TraceVerdict
  readonly hops: readonly string[]
}

const DATAPATHS: Record<string, (group: string, dpu: string) => string> = {
  switch: (g) => `group ${g} network`,
  router: (g) => `group ${g} router`,
  'transit-switch': (_, d) => `transit switch to DPU ${d}`,
  'gateway-router': (_, d) => `DPU ${d} gateway router`,
  'public-switch': (_, d) => `DPU ${d} public switch`,
}

const PORTS: Record<string, (dpu: string, host: string) => string> = {
  'host-port': (_, h) => `host ${h} port`,
  'relay-port': (d) => `DHCP relay port on DPU ${d}`,
  'router-switch-port': () => 'router port',
  'switch-router-port': () => 'router port',
  'router-transit-port': (d) => `router port to DPU ${d}`,
  'transit-router-port': (d) => `router port to DPU ${d}`,
  'transit-gateway-port': (d) => `gateway router port on DPU ${d}`,
  'gateway-transit-port': (d) => `transit port on DPU ${d}`,
  'gateway-public-port': (d) => `fabric port on DPU ${d}`,
  'public-gateway-port': (d) => `gateway router port on DPU ${d}`,
  'localnet-port': (d) => `DPU ${d} localnet port (the fabric)`,
}

/** A datapath in plain words, with its name: `group g router (hz/g/lr)`. */
export function describeDatapath(name: string | undefined): string {
  if (name === undefined) return 'a datapath'
  const parsed = parseTopologyName(name, 'datapath')
  const words = parsed && DATAPATHS[parsed.kind]?.(parsed.group, 'dpu' in parsed ? parsed.dpu : '')
  return words ? `${words} (${name})` : name
}

/** A port in plain words: `host h1 port`, `DPU d localnet port (the fabric)`. */
export function describePort(name: string | undefined): string {
  if (name === undefined) return 'a port'
  const parsed = parseTopologyName(name, 'port')
  if (!parsed) return name
  const words = PORTS[parsed.kind]?.(
    'dpu' in parsed ? parsed.dpu : '',
    'host' in parsed ? parsed.host : '',
  )
  return words ?? name
}

/**
 * The hops of a trace, one sentence each: per datapath, the port a packet came in by and
 * the one it left through (or what stopped it), with what actions did on the way (NAT, an
 * ARP request in its place) just before the hop they happened on.
 */
function hopsOf(trace: ParsedTrace): string[] {
  const hops: string[] = []
  /** An ingress pipeline no output has been reported for yet. */
  let entered: TraceSection | undefined
  /** The pipeline (egress, or multicast) outputs belong to. */
  let pipeline: TraceSection | undefined
  let said: string[] = []
  const flush = () => {
    if (entered) {
      hops.push(`${describeDatapath(entered.datapath)}: in from ${describePort(entered.inport)}`)
    }
    entered = undefined
    hops.push(...said)
    said = []
  }
  for (const s of trace.sections) {
    if (s.kind === 'ingress') {
      flush()
      entered = s
    } else if (s.kind === 'multicast') {
      const from = entered?.datapath === s.datapath ? entered : undefined
      entered = undefined
      flush()
      const came = from ? `in from ${describePort(from.inport)}, ` : ''
      hops.push(`${describeDatapath(s.datapath)}: ${came}floods it to every port (${s.mcgroup})`)
    } else if (s.kind === 'action') {
      const words = actionWords(s, trace)
      if (words) said.push(words)
    }
    if (s.kind !== 'action') pipeline = s
    for (const st of s.stages) {
      if (trace.drops.some((d) => d.stage === st)) {
        flush()
        const match = st.match ? ` (${st.match})` : ''
        hops.push(
          `${describeDatapath(s.datapath)}: dropped at stage ${st.table}. ${st.name}${match}`,
        )
      }
      if (st.actions.some((a) => /^ip[46]\.dst <-> ip[46]\.src;$/.test(a))) {
        flush()
        hops.push(`${describeDatapath(s.datapath)}: answers it itself; the reply goes back`)
      }
      if (!st.actions.some((a) => a.startsWith('/* output to')) || pipeline?.kind !== 'egress') {
        continue
      }
      const out = pipeline
      const from =
        entered?.datapath === out.datapath
          ? describePort(out.inport)
          : `from ${describePort(out.inport)}`
      entered = undefined
      hops.push(...said)
      said = []
      hops.push(`${describeDatapath(out.datapath)}: ${from} → ${describePort(out.outport)}`)
    }
  }
  flush()
  if (trace.stoppedAt) {
    const { datapath, stage, action } = trace.stoppedAt
    hops.push(
      `${describeDatapath(datapath)}: ovn-trace stops at stage ${stage.table}. ${stage.name} (${action})`,
    )
  }
  return hops
}

function actionWords(s: TraceSection, trace: ParsedTrace): string | undefined {
  const where = describeDatapath(s.datapath)
  const nat = /^ct_(snat|dnat)\(ip[46]\.(?:src|dst)=([^)\s]+)\)/.exec(s.title)
  if (nat) {
    return nat[1] === 'snat'
      ? `${where}: the source becomes ${nat[2]} (SNAT)`
      : `${where}: the destination becomes ${nat[2]} (DNAT)`
  }
  if (s.title === 'arp' || s.title === 'nd_ns') {
    const target = trace.generated.find((g) => g.datapath === s.datapath)?.target ?? 'its next hop'
    return `${where}: does not know the MAC of ${target}; sends an ARP request for it instead`
  }
  return undefined
}

/**
 * The verdict and hops of a parsed trace. The traced packet's own fate comes first: a
 * router answering it, a VIF or localnet port it reaches; else an ARP a router sends in
 * its place; else the first stage that dropped it.
 */
export function explain(trace: ParsedTrace): Explained {
  const hops = hopsOf(trace)
  const verdict = verdictOf(trace)
  return { verdict, hops }
}

function verdictOf(trace: ParsedTrace): TraceVerdict {
  if (trace.answeredBy) return { verdict: 'answered', router: trace.answeredBy }
  const outputs = finalOutputs(trace)
  const leaving = outputs.find((o) => o.type === 'localnet')
  if (leaving) {
    const snat = trace.nat.find((n) => n.kind === 'snat')
    const parsed = parseTopologyName(leaving.port, 'port')
    return {
      verdict: 'leaves',
      port: leaving.port,
      ...(parsed && 'dpu' in parsed ? { dpu: parsed.dpu } : {}),
      ...(snat ? { source: snat.address } : {}),
    }
  }
  const reached = outputs[0]
  if (reached) {
    const parsed = parseTopologyName(reached.port, 'port')
    return {
      verdict: 'delivered',
      port: reached.port,
      ...(parsed?.kind === 'host-port' ? { host: parsed.host, group: parsed.group } : {}),
    }
  }
  const asked = trace.generated.find((g) => g.action === 'arp' || g.action === 'nd_ns')
  if (asked) {
    const sent = finalOutputs(trace, asked.action)
    const out = sent.find((o) => o.type === 'localnet')
    if (out) {
      const parsed = parseTopologyName(out.port, 'port')
      return {
        verdict: 'leaves',
        port: out.port,
        ...(parsed && 'dpu' in parsed ? { dpu: parsed.dpu } : {}),
        arp: { target: asked.target ?? '', port: out.port },
      }
    }
    return {
      verdict: 'unresolved',
      target: asked.target ?? '',
      datapath: asked.datapath ?? '',
      reached: sent.map((o) => o.port),
    }
  }
  const drop = trace.drops.find((d) => d.generated === undefined)
  if (drop) {
    return {
      verdict: 'dropped',
      datapath: drop.datapath ?? '',
      stage: `${drop.stage.table}. ${drop.stage.name}`,
      match: drop.stage.match,
      reason: dropReason(drop.stage.name, drop.stage.implicitDrop),
    }
  }
  if (trace.stoppedAt) {
    const { datapath, stage, action } = trace.stoppedAt
    return {
      verdict: 'inconclusive',
      datapath: datapath ?? '',
      stage: `${stage.table}. ${stage.name}`,
      action,
    }
  }
  const last = [...trace.sections].reverse().find((s) => s.datapath !== undefined)
  return {
    verdict: 'dropped',
    datapath: last?.datapath ?? '',
    stage: '',
    match: '',
    reason: 'no port takes it (it would only go back where it came from)',
  }
}

/** Why a stage drops, in words, for the stages a group topology drops in. */
function dropReason(stage: string, implicit: boolean): string {
  if (implicit) return 'no logical flow of the stage matches it'
  if (stage.includes('port_sec')) {
    return "port security: its source MAC or address is not the port's own"
  }
  if (stage.includes('acl')) return 'an ACL drops it'
  if (stage === 'lr_in_ip_routing') return 'the router has no route to its destination'
  if (stage === 'lr_in_ip_input')
    return 'the router does not forward it (addressed to it, or not routable)'
  if (stage.includes('admission')) return 'the router does not accept it on this port'
  return `stage ${stage} drops it`
}

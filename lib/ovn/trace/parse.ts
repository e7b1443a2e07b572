/**
 * A parser of `ovn-trace`'s detailed output (the default format of OVN 23.03): the
 * microflow, each pipeline section (`ingress(dp=…, inport=…)`, `egress(…)`,
 * `multicast(…)`) with its stage lines (` 9. ls_in_acl (northd.c:…): match, priority P,
 * uuid U`) and their actions, and the headers ovn-trace prints for what an action did
 * (`ct_snat(ip4.src=…)`, `arp`, `select: …`). Pure: text in, facts out.
 *
 * @example
 * const trace = parseTrace(stdout)
 * trace.outputs // [{ port: 'hz/g/h2', type: '', datapath: 'hz/g/ls', generated: undefined }]
 */
import { TraceOutputError } from './errors.ts'

/** One logical flow the packet matched, and the actions ovn-trace printed under it. */
export interface TraceStage {
  /** The table number, e.g. 9. */
  readonly table: number
  /** The stage name, e.g. `ls_in_acl`. */
  readonly name: string
  readonly match: string
  readonly priority: number
  /** Action lines and comments, trimmed (`drop;`, `/* No MAC binding. *\/`). */
  readonly actions: readonly string[]
  /** `no match (implicit drop)`: no flow of the table matched. */
  readonly implicitDrop: boolean
}

/** A header and what follows it up to the next header. */
export interface TraceSection {
  /**
   * `ingress` / `egress` / `multicast`: a pipeline of `datapath`; `action`: what an
   * action did (`ct_snat(ip4.src=1.2.3.4)`, `arp`, `select: …`), within the pipeline
   * before it (whose datapath and ports it carries).
   */
  readonly kind: 'ingress' | 'egress' | 'multicast' | 'action'
  /** The header as printed, e.g. `ingress(dp="hz/g/ls", inport="hz/g/h1")`. */
  readonly title: string
  readonly datapath: string | undefined
  readonly inport: string | undefined
  readonly outport: string | undefined
  /** The multicast group of a `multicast` section. */
  readonly mcgroup: string | undefined
  /** Indentation depth: sections under a multicast group are nested. */
  readonly depth: number
  readonly stages: TraceStage[]
  /** Lines outside any stage (`/* omitting output … *\/`, `*** …` errors). */
  readonly notes: string[]
}

/** Where a packet left the logical pipelines, as `/* output to "P", type "T" *\/` says. */
export interface TraceOutput {
  readonly port: string
  /** The port's SB type: `` (a VIF), `localnet`, `patch`, `l3gateway`, … */
  readonly type: string
  readonly datapath: string | undefined
  /** The packet an action generated (`arp`, `icmp4`, …) that this is; absent: the traced one. */
  readonly generated: string | undefined
}

/** A stage whose actions drop the packet (`drop;`, or no flow matched). */
export interface TraceDrop {
  readonly datapath: string | undefined
  readonly stage: TraceStage
  readonly generated: string | undefined
}

/** An address rewrite ovn-trace applied: `ct_snat(ip4.src=X)`, `ct_dnat(ip4.dst=X)`. */
export interface TraceNat {
  readonly kind: 'snat' | 'dnat'
  readonly address: string
  readonly datapath: string | undefined
}

/** A packet a router generated instead of forwarding (an ARP for an unknown next hop). */
export interface TraceGenerated {
  /** The action: `arp`, `nd_ns`, `icmp4`, `icmp6`, `tcp_reset`, … */
  readonly action: string
  readonly datapath: string | undefined
  /** For `arp` / `nd_ns`: the address asked for (the router's next hop). */
  readonly target: string | undefined
}

export interface ParsedTrace {
  /** The microflow line's fields, e.g. `{ nw_src: '10.0.0.2', dl_dst: '…' }` (`proto`: `icmp`, …). */
  readonly microflow: Readonly<Record<string, string>>
  readonly sections: readonly TraceSection[]
  readonly outputs: readonly TraceOutput[]
  readonly drops: readonly TraceDrop[]
  readonly nat: readonly TraceNat[]
  readonly generated: readonly TraceGenerated[]
  /** A router answered the packet itself (it swapped source and destination). */
  readonly answeredBy: string | undefined
  /**
   * The trace ended at a stage whose last action ovn-trace does not follow (OVN 23.03
   * stops at a gateway router's un-SNAT `ct_snat;`): where, and which action.
   */
  readonly stoppedAt:
    | { readonly datapath: string | undefined; readonly stage: TraceStage; readonly action: string }
    | undefined
  /** `***` lines: what ovn-trace could not do. */
  readonly errors: readonly string[]
}

const STAGE = /^(\s*)(\d+)\. (\S+?)(?: \(([^)]*)\))?: (.*), priority (\d+), uuid ([0-9a-f]+)$/
const IMPLICIT_DROP = /^(\s*)(\d+)\. (\S+?)(?: \(([^)]*)\))?: no match \(implicit drop\)$/
const PIPELINE = /^(ingress|egress|multicast)\((.*)\)$/
const OUTPUT = /^\/\* output to "([^"]*)", type "([^"]*)" \*\/$/
const NAT_HEADER = /^ct_(snat|dnat)\(ip[46]\.(?:src|dst)=([^)\s]+)\)/
/** Actions whose header starts a packet of their own (the traced one is consumed). */
const GENERATING = new Set([
  'arp',
  'nd_ns',
  'nd_na',
  'nd_na_router',
  'icmp4',
  'icmp4_error',
  'icmp6',
  'icmp6_error',
  'tcp_reset',
  'sctp_abort',
  'reject',
  'clone',
])
const FINAL_ACTIONS = new Set(['next;', 'output;', 'drop;'])

function attributes(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
    if (m[1] !== undefined && m[2] !== undefined) out[m[1]] = m[2]
  }
  return out
}

function microflowOf(line: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const [i, part] of line.split(',').entries()) {
    const eq = part.indexOf('=')
    if (eq < 0) {
      if (i === 0) fields.proto = part.trim()
      continue
    }
    fields[part.slice(0, eq).trim()] = part.slice(eq + 1).trim()
  }
  return fields
}

/**
 * Parses `ovn-trace --detailed` output.
 *
 * @throws TraceOutputError when the text is not a trace (ovn-trace printed an error)
 */
export function parseTrace(text: string): ParsedTrace {
  const lines = text.replace(/\r/g, '').split('\n')
  const first = lines.findIndex((l) => l.trim() !== '')
  if (first < 0 || !lines[first]?.startsWith('# ')) throw new TraceOutputError(text)
  const microflow = microflowOf(lines[first].slice(2))

  const sections: TraceSection[] = []
  const outputs: TraceOutput[] = []
  const drops: TraceDrop[] = []
  const nat: TraceNat[] = []
  const generated: TraceGenerated[] = []
  const errors: string[] = []
  let answeredBy: string | undefined
  let section: TraceSection | undefined
  let stage: { stage: TraceStage; actions: string[] } | undefined
  /** The packet generated most recently: what follows it is that packet. */
  let current: string | undefined
  /** Literal values given to `reg0` (a router's next hop) in the current pipeline. */
  let nextHop: string | undefined

  const pipelineOf = (depth: number) =>
    [...sections].reverse().find((s) => s.kind !== 'action' && s.depth <= depth) ?? section
  const isHeader = (i: number) => /^\s*-+\s*$/.test(lines[i + 1] ?? '') && lines[i]?.trim() !== ''

  for (let i = first + 1; i < lines.length; i++) {
    const line = lines[i] ?? ''
    const trimmed = line.trim()
    if (trimmed === '' || /^-+$/.test(trimmed)) continue
    const depth = line.length - line.trimStart().length

    if (isHeader(i)) {
      stage = undefined
      const pipeline = PIPELINE.exec(trimmed)
      if (pipeline) {
        const attrs = attributes(pipeline[2] ?? '')
        const kind = pipeline[1] as 'ingress' | 'egress' | 'multicast'
        if (kind === 'ingress') nextHop = undefined
        section = {
          kind,
          title: trimmed,
          datapath: attrs.dp,
          inport: attrs.inport,
          outport: attrs.outport,
          mcgroup: attrs.mcgroup,
          depth,
          stages: [],
          notes: [],
        }
      } else {
        const within = pipelineOf(depth)
        section = {
          kind: 'action',
          title: trimmed,
          datapath: within?.datapath,
          inport: within?.inport,
          outport: within?.outport,
          mcgroup: undefined,
          depth,
          stages: [],
          notes: [],
        }
        const action = /^[a-z0-9_]+/.exec(trimmed)?.[0] ?? trimmed
        const rewrite = NAT_HEADER.exec(trimmed)
        if (rewrite?.[1] && rewrite[2]) {
          nat.push({
            kind: rewrite[1] as 'snat' | 'dnat',
            address: rewrite[2],
            datapath: section.datapath,
          })
        }
        if (GENERATING.has(action)) {
          current = action
          const asks = action === 'arp' || action === 'nd_ns'
          const target = nextHop === 'ip4.dst' ? microflow.nw_dst : nextHop
          generated.push({
            action,
            datapath: section.datapath,
            target: asks ? (target ?? microflow.nw_dst ?? microflow.ipv6_dst) : undefined,
          })
        }
      }
      sections.push(section)
      continue
    }

    const matched = STAGE.exec(line)
    const implicit = matched ? undefined : IMPLICIT_DROP.exec(line)
    const head = matched ?? implicit
    if (head) {
      const s: TraceStage = {
        table: Number(head[2]),
        name: head[3] ?? '',
        match: matched ? (matched[5] ?? '') : '',
        priority: matched ? Number(matched[6]) : 0,
        actions: [],
        implicitDrop: implicit !== undefined && implicit !== null,
      }
      stage = { stage: s, actions: s.actions as string[] }
      section?.stages.push(s)
      if (s.implicitDrop) drops.push({ datapath: section?.datapath, stage: s, generated: current })
      continue
    }

    if (trimmed.startsWith('***')) {
      errors.push(trimmed)
      section?.notes.push(trimmed)
      continue
    }
    const output = OUTPUT.exec(trimmed)
    if (output?.[1] !== undefined) {
      outputs.push({
        port: output[1],
        type: output[2] ?? '',
        datapath: section?.datapath,
        generated: current,
      })
    }
    if (!stage) {
      section?.notes.push(trimmed)
      continue
    }
    stage.actions.push(trimmed)
    if (trimmed === 'drop;') {
      drops.push({ datapath: section?.datapath, stage: stage.stage, generated: current })
    }
    const hop = /^reg0 = ([^;]+);$/.exec(trimmed)
    if (hop?.[1]) nextHop = hop[1]
    if (/^ip[46]\.dst <-> ip[46]\.src;$/.test(trimmed) && current === undefined) {
      answeredBy = section?.datapath
    }
  }

  const last = [...sections].reverse().find((s) => s.stages.length > 0)
  const lastStage = last?.stages.at(-1)
  const lastAction = lastStage?.actions.filter((a) => !a.startsWith('/*')).at(-1)
  const ended = last === sections.at(-1) && lastAction !== undefined
  // Actions that end without `next;` or `output;` drop the packet. `ct_commit { … };` is
  // one (a stateful ACL's deny of an established connection marks it blocked and drops
  // it); other `ct_…` actions go on in a table ovn-trace did not follow.
  const committed = ended && lastStage && lastAction?.startsWith('ct_commit')
  if (committed) drops.push({ datapath: last?.datapath, stage: lastStage, generated: current })
  const stoppedAt =
    ended &&
    !committed &&
    lastStage &&
    lastAction &&
    !FINAL_ACTIONS.has(lastAction) &&
    /^ct_/.test(lastAction)
      ? { datapath: last?.datapath, stage: lastStage, action: lastAction.replace(/;$/, '') }
      : undefined

  return {
    microflow,
    sections,
    outputs,
    drops,
    nat,
    generated,
    answeredBy,
    stoppedAt,
    errors,
  }
}

/** Ports a packet may pass through on its way: router patches and gateway ports. */
const INTERNAL_TYPES = new Set(['patch', 'l3gateway', 'chassisredirect'])

/**
 * Where the traced packet (or one it generated, with `generated`) left the logical
 * network: outputs to VIFs, localnet ports and the like, not to router patches.
 */
export function finalOutputs(trace: ParsedTrace, generated?: string): TraceOutput[] {
  return trace.outputs.filter((o) => !INTERNAL_TYPES.has(o.type) && o.generated === generated)
}

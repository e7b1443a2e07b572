/**
 * Whether ovn-controller has acted on a port: installed the local port (OVS marks it
 * `ovn-installed`), or released the logical port's Southbound `Port_Binding` from this
 * chassis; and waiting, within a time limit, until it has.
 */
import {
  Database,
  OvsdbClient,
  type OvsdbClientOptions,
  type SbTables,
  sbSchema,
} from '../lib/ovn/index.ts'
import type { LocalOvs } from './ovs.ts'
import type { OvsdbTls } from './tls.ts'

const SB = new Database<SbTables>(sbSchema)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Polls `check` every 200 ms until it returns true (→ true) or `timeoutMs` passes (→ false). */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await sleep(200)
  }
}

/** True when the agent-owned port `name` exists and ovn-controller marked it installed. */
export async function portInstalled(ovs: LocalOvs, name: string): Promise<boolean> {
  return (await ovs.snapshot()).owned.find((p) => p.name === name)?.ovnInstalled === true
}

/** `OvsdbClient.connect`'s options with `tls`, the material for `ssl:` remotes. */
type SouthboundConnectOptions = OvsdbClientOptions & { readonly tls?: OvsdbTls }

/**
 * True when the SB `Port_Binding` of `logicalPort` is known not to be on chassis
 * `systemId`: the SB answered, and has no such port or binds it elsewhere (or there is no
 * SB to follow at all: `remote` null). Whenever the agent cannot check — the SB is
 * unreachable, refuses the agent's certificate, or is `ssl:` and the agent has no TLS
 * material or its OVSDB client cannot speak TLS — the answer is false: a binding nobody
 * could see is not a released one, and the controller must not report the host isolated.
 */
export async function southboundReleased(opts: {
  /** The SB remote ovn-controller follows (none: nothing can be bound). */
  remote: string | null
  logicalPort: string
  systemId: string
  /** For `ssl:` remotes: the DPU's certificate, key and CA. */
  tls?: OvsdbTls
  log: (line: string) => void
}): Promise<boolean> {
  const { remote } = opts
  if (!remote) return true
  if (remote.startsWith('ssl:') && !opts.tls) {
    opts.log(`cannot check southbound ${remote} (ssl:, and no --tls-*): not counted as released`)
    return false
  }
  let client: OvsdbClient | undefined
  try {
    const options: SouthboundConnectOptions = {
      reconnect: false,
      connectTimeoutMs: 2000,
      echoIntervalMs: 0,
      ...(remote.startsWith('ssl:') && opts.tls ? { tls: opts.tls } : {}),
    }
    client = await OvsdbClient.connect(remote, options)
    const [bindings, chassis] = await client.transact(SB.name, [
      SB.select('Port_Binding', [['logical_port', '==', opts.logicalPort]], ['chassis']),
      SB.select('Chassis', [['name', '==', opts.systemId]], ['_uuid']),
    ])
    const ours = SB.decodeRows('Chassis', chassis?.rows)[0]?._uuid
    const binding = SB.decodeRows('Port_Binding', bindings?.rows)[0]
    return !binding || binding.chassis === null || binding.chassis !== ours
  } catch (err) {
    opts.log(`cannot check southbound ${remote}: ${String(err)}; not counted as released`)
    return false
  } finally {
    await client?.close()
  }
}

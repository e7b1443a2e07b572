/**
 * Whether ovn-controller has acted on a port: installed the local port (OVS marks it
 * `ovn-installed`), or released the logical port's Southbound `Port_Binding` from this
 * chassis; and waiting, within a time limit, until it has. The install is heard through a
 * monitor of the local OVS database (pushed when ovn-controller commits it); the release
 * is asked of the Southbound until it says so.
 */
import {
  certificateRefused,
  Database,
  type MonitorHandle,
  OvsdbClient,
  type OvsdbClientOptions,
  type SbTables,
  sbSchema,
} from '../lib/ovn/index.ts'
import { SouthboundRefusedCredentials } from './errors.ts'
import {
  isOwnedRole,
  Key,
  type LocalOvs,
  OVS,
  type OvsSnapshot,
  type OwnedPort,
  releasingKey,
} from './ovs.ts'
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

/**
 * Resolves true once ovn-controller has marked the agent-owned port `name`, bound to
 * `logicalPort`, `ovn-installed` — its flows are in — and false when `timeoutMs` passes
 * first, or when `stopWhen` settles first. It follows the local Interface table through an
 * OVSDB monitor, which OVS updates the moment ovn-controller commits the mark: the answer
 * comes a round trip after the mark, not a poll interval. A mark already there answers at
 * once (the monitor's initial rows). The monitor is cancelled either way; a monitor that
 * cannot start throws.
 */
export async function waitInstalled(
  ovs: LocalOvs,
  name: string,
  logicalPort: string,
  timeoutMs: number,
  stopWhen?: Promise<unknown>,
): Promise<boolean> {
  let settle: (installed: boolean) => void = () => {}
  const outcome = new Promise<boolean>((resolve) => {
    settle = resolve
  })
  const timer = setTimeout(() => settle(false), timeoutMs)
  void stopWhen?.then(() => settle(false))
  /** The port's interface rows (one, unless it was replaced meanwhile), by UUID. */
  const rows = new Map<string, Readonly<Record<string, string>>>()
  let monitor: MonitorHandle | undefined
  try {
    monitor = await ovs.client.monitor(
      OVS.name,
      { Interface: { columns: ['name', 'external_ids'] } },
      (updates, reset) => {
        // After a reconnect the monitor starts over with the whole table.
        if (reset) rows.clear()
        for (const [uuid, change] of Object.entries(updates.Interface ?? {})) {
          const row = change.new ? OVS.decodeRow('Interface', change.new) : undefined
          if (row?.name === name) rows.set(uuid, row.external_ids)
          else rows.delete(uuid)
        }
        for (const ids of rows.values()) {
          if (
            isOwnedRole(ids[Key.role]) &&
            ids[Key.ifaceId] === logicalPort &&
            ids[Key.ovnInstalled] === 'true'
          )
            settle(true)
        }
      },
    )
    return await outcome
  } finally {
    clearTimeout(timer)
    await monitor?.cancel().catch(() => undefined)
  }
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
 * Credentials TLS refuses (either side's certificate) throw `SouthboundRefusedCredentials`
 * instead: waiting cannot make them work.
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
    // Credentials the SB will never take: waiting for them to work only delays the retry
    // that may bring renewed ones.
    const refused = certificateRefused(err)
    if (refused) throw new SouthboundRefusedCredentials(opts.systemId, remote, refused)
    opts.log(`cannot check southbound ${remote}: ${String(err)}; not counted as released`)
    return false
  } finally {
    await client?.close()
  }
}

/**
 * True when every SB in `remotes` says `logicalPort` is not bound to chassis `systemId`
 * (`southboundReleased`, asked one after another); with none to ask, true. `log` gets
 * each line with the remote it is about.
 */
export async function releasedEverywhere(opts: {
  remotes: readonly string[]
  logicalPort: string
  systemId: string
  /** For `ssl:` remotes: what to present to each (each group's SB has its own CA). */
  tls?: (remote: string) => OvsdbTls
  log: (remote: string, line: string) => void
}): Promise<boolean> {
  const { remotes, log, tls, ...ask } = opts
  for (const remote of remotes) {
    const asked = { ...ask, remote, log: (line: string) => log(remote, line) }
    if (!(await southboundReleased({ ...asked, ...(tls ? { tls: tls(remote) } : {}) }))) {
      return false
    }
  }
  return true
}

/**
 * The SBs an isolate of `logicalPort` must hear from before it says unbound: the one each
 * of its ports (`targets`) was bound through, those an earlier run of the same isolate
 * remembered (its ports are gone by now: a retry, or an agent restarted in between), and
 * the one ovn-controller follows. The first two are remembered in OVS (`releasingKey`)
 * before the caller removes the ports; `configure` of the port, or its release, forgets
 * them.
 */
export async function southboundsToAsk(
  ovs: LocalOvs,
  snap: OvsSnapshot,
  targets: readonly OwnedPort[],
  logicalPort: string,
): Promise<string[]> {
  const key = releasingKey(logicalPort)
  const remembered = parseRemotes(snap.notes[key])
  const boundThrough = targets.map((p) => p.externalIds[Key.sbRemote] ?? '')
  const toRemember = [...new Set([...remembered, ...boundThrough])].filter((r) => r !== '')
  if (toRemember.length > remembered.length) {
    await ovs.setNotes({ [key]: JSON.stringify(toRemember) })
  }
  return [...new Set([...toRemember, snap.ovnRemote ?? ''])].filter((r) => r !== '')
}

/** SB remotes from their JSON array (what an isolate remembered); nothing when unreadable. */
export function parseRemotes(raw: string | undefined): string[] {
  if (!raw) return []
  try {
    const parsed: unknown = JSON.parse(raw)
    return Array.isArray(parsed) ? parsed.filter((r): r is string => typeof r === 'string') : []
  } catch {
    return []
  }
}

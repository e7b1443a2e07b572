/**
 * The agent's view of its local Open_vSwitch database, through lib/ovn's OVSDB client:
 * read what is there, and converge bridges, chassis settings and ports to what a job
 * wants, one transaction per step. Every port the agent creates carries
 * `hydrazine:*` external_ids, so that it only ever touches its own ports: `ensurePort`
 * writes only what `claimPort` (`port-claims.ts`) grants — it never moves a port between
 * bridges, takes over one it did not make, or rewrites whose a port is.
 */
import {
  Database,
  OvsdbClient,
  type OvsInterface,
  type OvsPort,
  type OvsTables,
  ovsSchema,
} from '../lib/ovn/index.ts'
import { type Claim, claimPort, type ExistingPort, granted, type PortClaim } from './port-claims.ts'

export const OVS = new Database<OvsTables>(ovsSchema)

/** external_ids keys on the agent's Interfaces and Ports. */
export const Key = {
  role: 'hydrazine:role',
  group: 'hydrazine:group',
  host: 'hydrazine:host',
  dhcpServer: 'hydrazine:dhcp-server',
  relayMac: 'hydrazine:relay-mac',
  relayAddress: 'hydrazine:relay-address',
  relayUplink: 'hydrazine:relay-uplink',
  sbRemote: 'hydrazine:sb-remote',
  ifaceId: 'iface-id',
  attachedMac: 'attached-mac',
  ovnInstalled: 'ovn-installed',
} as const

/**
 * The agent's notes about its own jobs — when each binding's last job was sent
 * (`job-order.ts`), which SBs an isolate waits on — kept with the ports in the OVS
 * database (they outlive the agent and a reboot), in the integration bridge's
 * external_ids. Not in the Open_vSwitch row's: ovn-controller follows those, and every
 * change to them makes it recompute all its logical flows (OVN 23.03 to today have no
 * incremental handler for that input), which per job costs the DPU in proportion to its
 * groups' size. A bridge's external_ids it does not follow. Notes made before the bridge
 * existed, or by an older agent, are in the Open_vSwitch row: both are read, the bridge's
 * win, and a note removed goes from both.
 */
const NOTE_PREFIXES = ['hydrazine:releasing:', 'hydrazine:job-sent:'] as const

/** True when `key` is one of the agent's notes (`NOTE_PREFIXES`). */
export function isNoteKey(key: string): boolean {
  return NOTE_PREFIXES.some((prefix) => key.startsWith(prefix))
}

/** The notes among the Open_vSwitch row's external_ids and the notes bridge's (which win). */
function notesOf(
  row: Readonly<Record<string, string>>,
  bridge: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  return Object.fromEntries(
    [...Object.entries(row), ...Object.entries(bridge ?? {})].filter(([key]) => isNoteKey(key)),
  )
}

/** Removes notes `keys` from the Open_vSwitch row (none: no operation). */
function legacyRemoval(keys: readonly string[]) {
  return keys.length > 0
    ? [OVS.mutate('Open_vSwitch', [], [['external_ids', 'delete', [...keys]]])]
    : []
}

/**
 * The note that remembers, while `isolate` waits for the Southbound to release
 * `logicalPort`, which SBs it must ask (a JSON array): the port that named them is gone by
 * then, and a retry or a restarted agent must ask the same ones.
 */
export function releasingKey(logicalPort: string): string {
  return `${NOTE_PREFIXES[0]}${logicalPort}`
}

/** The note of when the last job about `binding` that changed this DPU was sent. */
export function jobSentKey(binding: string): string {
  return `${NOTE_PREFIXES[1]}${binding}`
}

/**
 * The Open_vSwitch row's external_ids key holding the certificate the DPU presents to the
 * Southbound it follows (PEM): kept with `ovn-remote` in the OVS database, which outlives
 * a reboot that empties the agent's run directory.
 */
export const SB_CERTIFICATE_KEY = 'hydrazine:sb-certificate'

/**
 * The Open_vSwitch row's external_ids key holding the certificate last presented to the SB
 * at `remote`: an isolate that asks that SB later, after the DPU moved to another group's
 * SB, presents it there rather than the new group's certificate, which it would refuse.
 */
export function sbCertificateKeyOf(remote: string): string {
  return `${SB_CERTIFICATE_KEY}@${remote}`
}

/**
 * The Open_vSwitch row's external_ids key holding the CA the DPU trusts for the Southbound
 * it follows (PEM), kept like `SB_CERTIFICATE_KEY`.
 */
export const SB_CA_KEY = 'hydrazine:sb-ca'

/** The key holding the CA last trusted for the SB at `remote` (see `sbCertificateKeyOf`). */
export function sbCaKeyOf(remote: string): string {
  return `${SB_CA_KEY}@${remote}`
}

export type PortRole = 'host' | 'dhcp-relay' | 'dhcp-relay-uplink'
const ROLES: readonly string[] = ['host', 'dhcp-relay', 'dhcp-relay-uplink'] satisfies PortRole[]

/** True when `role` (an interface's `hydrazine:role`) is one of the agent's own ports. */
export function isOwnedRole(role: string | undefined): role is PortRole {
  return role !== undefined && ROLES.includes(role)
}

/** One agent-owned port (host and relay ports on br-int, relay uplinks on the uplink bridge). */
export interface OwnedPort {
  readonly name: string
  /** The bridge holding it. */
  readonly bridge: string | null
  readonly role: PortRole
  readonly group: string
  readonly logicalPort: string
  readonly ovnInstalled: boolean
  readonly externalIds: Readonly<Record<string, string>>
  readonly ofport: number | null
}

export interface OvsSnapshot {
  readonly systemId: string | null
  readonly ovnRemote: string | null
  readonly chassisIds: Readonly<Record<string, string>>
  /** The agent's notes (`isNoteKey`): the integration bridge's over the Open_vSwitch row's. */
  readonly notes: Readonly<Record<string, string>>
  readonly bridges: readonly string[]
  /** Bridge name → its port names. */
  readonly bridgePorts: Readonly<Record<string, readonly string[]>>
  readonly owned: readonly OwnedPort[]
  /** Every port and interface by name, Hydrazine's or not, and the bridge holding it. */
  readonly ports: ReadonlyMap<string, ExistingPort>
}

export interface BridgeSpec {
  readonly name: string
  readonly datapathType: string
  readonly failMode?: 'secure' | 'standalone'
  /** Extra ports (system interfaces) the bridge must hold, e.g. the uplink. */
  readonly ports?: readonly string[]
}

export interface PortSpec {
  readonly bridge: string
  readonly name: string
  /** `internal` for an OVS-created port (the relay), '' for an existing netdev. */
  readonly type: '' | 'internal'
  readonly mac?: string
  readonly mtu?: number
  /**
   * Must hold after the call; other keys (e.g. ovn-installed) are left alone. Holds
   * `hydrazine:role`.
   */
  readonly externalIds: Readonly<Record<string, string>>
  /** The keys of `externalIds` that say whose the port is (never rewritten), e.g. `iface-id`. */
  readonly owner: readonly string[]
}

/** What `spec` claims: its bridge, role and owner. */
export function claimOf(spec: PortSpec): PortClaim {
  return {
    name: spec.name,
    bridge: spec.bridge,
    role: spec.externalIds[Key.role] ?? '',
    owner: Object.fromEntries(spec.owner.map((k) => [k, spec.externalIds[k] ?? ''])),
  }
}

/** Reads and converges the local Open_vSwitch database. */
export class LocalOvs {
  private constructor(
    readonly client: OvsdbClient,
    readonly notesBridge: string,
  ) {}

  /** Connects to the OVS database at `remote`; the agent's notes live on `notesBridge`. */
  static async connect(remote: string, notesBridge = 'br-int'): Promise<LocalOvs> {
    return new LocalOvs(
      await OvsdbClient.connect(remote, { connectTimeoutMs: 15_000 }),
      notesBridge,
    )
  }

  close(): Promise<void> {
    return this.client.close()
  }

  async snapshot(): Promise<OvsSnapshot> {
    const [ovs, bridges, ports, ifaces] = await this.client.transact(OVS.name, [
      OVS.select('Open_vSwitch', [], ['external_ids']),
      OVS.select('Bridge', [], ['name', 'ports', 'external_ids']),
      OVS.select('Port', [], ['_uuid', 'name', 'interfaces', 'external_ids']),
      OVS.select('Interface', [], ['_uuid', 'name', 'external_ids', 'ofport']),
    ])
    const root = OVS.decodeRows('Open_vSwitch', ovs?.rows)[0]
    const ids = root?.external_ids ?? {}
    const portRows = OVS.decodeRows('Port', ports?.rows) as OvsPort[]
    const portNames = new Map(portRows.map((p) => [p._uuid, p.name]))
    const bridgeRows = OVS.decodeRows('Bridge', bridges?.rows)
    const ifaceRows = OVS.decodeRows('Interface', ifaces?.rows) as OvsInterface[]

    // Which bridge holds each port, and each port's interfaces.
    const bridgeOfPort = new Map<string, string>()
    for (const b of bridgeRows) for (const u of b.ports) bridgeOfPort.set(u, b.name)
    const portOfIface = new Map<string, OvsPort>()
    for (const p of portRows) for (const u of p.interfaces) portOfIface.set(u, p)
    const all = new Map<string, ExistingPort>()
    for (const p of portRows) {
      all.set(p.name, {
        name: p.name,
        bridge: bridgeOfPort.get(p._uuid) ?? null,
        role: p.external_ids[Key.role],
        externalIds: p.external_ids,
      })
    }
    // An interface's external_ids say more (iface-id lives there): they win.
    for (const i of ifaceRows) {
      const port = portOfIface.get(i._uuid)
      all.set(i.name, {
        name: i.name,
        bridge: port ? (bridgeOfPort.get(port._uuid) ?? null) : null,
        role: i.external_ids[Key.role] ?? port?.external_ids[Key.role],
        externalIds: i.external_ids,
      })
    }

    const owned: OwnedPort[] = []
    for (const i of ifaceRows) {
      const role = i.external_ids[Key.role]
      if (!isOwnedRole(role)) continue
      owned.push({
        name: i.name,
        bridge: all.get(i.name)?.bridge ?? null,
        role,
        group: i.external_ids[Key.group] ?? '',
        logicalPort: i.external_ids[Key.ifaceId] ?? '',
        ovnInstalled: i.external_ids[Key.ovnInstalled] === 'true',
        externalIds: i.external_ids,
        ofport: i.ofport,
      })
    }
    return {
      systemId: ids['system-id'] ?? null,
      ovnRemote: ids['ovn-remote'] ?? null,
      chassisIds: ids,
      notes: notesOf(ids, bridgeRows.find((b) => b.name === this.notesBridge)?.external_ids),
      bridges: bridgeRows.map((b) => b.name).sort(),
      bridgePorts: Object.fromEntries(
        bridgeRows.map((b) => [b.name, b.ports.map((u) => portNames.get(u) ?? u).sort()]),
      ),
      owned: owned.sort((a, b) => a.name.localeCompare(b.name)),
      ports: all,
    }
  }

  /** Creates missing bridges (with their internal port) and adds missing extra ports. */
  async ensureBridges(specs: readonly BridgeSpec[]): Promise<void> {
    const snap = await this.snapshot()
    const ops = []
    for (const b of specs) {
      if (!snap.bridges.includes(b.name)) {
        const ref = `br_${b.name.replace(/\W/g, '_')}`
        const extra = (b.ports ?? []).map((p, n) => ({ name: p, ref: `${ref}_p${n}` }))
        ops.push(OVS.insert('Interface', { name: b.name, type: 'internal' }, `${ref}_i`))
        ops.push(OVS.insert('Port', { name: b.name, interfaces: [`${ref}_i`] }, `${ref}_p`))
        for (const p of extra) {
          ops.push(OVS.insert('Interface', { name: p.name }, `${p.ref}i`))
          ops.push(OVS.insert('Port', { name: p.name, interfaces: [`${p.ref}i`] }, p.ref))
        }
        ops.push(
          OVS.insert(
            'Bridge',
            {
              name: b.name,
              datapath_type: b.datapathType,
              fail_mode: b.failMode ?? null,
              ports: [`${ref}_p`, ...extra.map((p) => p.ref)],
              external_ids: { 'hydrazine:role': 'bridge' },
            },
            ref,
          ),
        )
        ops.push(OVS.mutate('Open_vSwitch', [], [['bridges', 'insert', [ref]]]))
        continue
      }
      const have = snap.bridgePorts[b.name] ?? []
      for (const [n, p] of (b.ports ?? []).entries()) {
        if (have.includes(p)) continue
        const ref = `xp_${n}_${b.name.replace(/\W/g, '_')}`
        ops.push(OVS.insert('Interface', { name: p }, `${ref}i`))
        ops.push(OVS.insert('Port', { name: p, interfaces: [`${ref}i`] }, ref))
        ops.push(OVS.mutate('Bridge', [['name', '==', b.name]], [['ports', 'insert', [ref]]]))
      }
    }
    if (ops.length > 0) await this.commit(ops)
  }

  /** Makes the Open_vSwitch row's external_ids hold `ids` (other keys are kept). */
  async setChassisIds(ids: Readonly<Record<string, string>>): Promise<boolean> {
    const snap = await this.snapshot()
    const changed = Object.entries(ids).filter(([k, v]) => snap.chassisIds[k] !== v)
    if (changed.length === 0) return false
    const keys = changed.map(([k]) => k)
    await this.client.transact(OVS.name, [
      OVS.mutate('Open_vSwitch', [], [['external_ids', 'delete', keys]]),
      OVS.mutate('Open_vSwitch', [], [['external_ids', 'insert', Object.fromEntries(changed)]]),
    ])
    return true
  }

  /** Removes keys from the Open_vSwitch row's external_ids (absent ones are no change). */
  async removeChassisIds(keys: readonly string[]): Promise<boolean> {
    const snap = await this.snapshot()
    const present = keys.filter((k) => k in snap.chassisIds)
    if (present.length === 0) return false
    await this.commit([OVS.mutate('Open_vSwitch', [], [['external_ids', 'delete', present]])])
    return true
  }

  /**
   * Makes the agent's notes hold `notes` (`isNoteKey` keys; other notes are kept): on the
   * integration bridge, or on the Open_vSwitch row while there is no such bridge. A note
   * moved to the bridge leaves the row.
   */
  async setNotes(notes: Readonly<Record<string, string>>): Promise<boolean> {
    const foreign = Object.keys(notes).find((k) => !isNoteKey(k))
    if (foreign !== undefined) throw new TypeError(`${foreign} is not a note of the agent`)
    const where = await this.readNotes()
    const changed = Object.entries(notes).filter(([k, v]) => where.notes[k] !== v)
    if (changed.length === 0) return false
    const keys = changed.map(([k]) => k)
    const values = Object.fromEntries(changed)
    const ops = where.bridge
      ? [
          OVS.mutate(
            'Bridge',
            [['name', '==', this.notesBridge]],
            [['external_ids', 'delete', keys]],
          ),
          OVS.mutate(
            'Bridge',
            [['name', '==', this.notesBridge]],
            [['external_ids', 'insert', values]],
          ),
          // Moved: the row's copy goes (an older agent's, or one made before the bridge).
          ...legacyRemoval(keys.filter((k) => k in where.row)),
        ]
      : [
          OVS.mutate('Open_vSwitch', [], [['external_ids', 'delete', keys]]),
          OVS.mutate('Open_vSwitch', [], [['external_ids', 'insert', values]]),
        ]
    await this.client.transact(OVS.name, ops)
    return true
  }

  /** Removes the agent's notes `keys` wherever they are (absent ones are no change). */
  async removeNotes(keys: readonly string[]): Promise<boolean> {
    const where = await this.readNotes()
    const present = keys.filter((k) => isNoteKey(k) && k in where.notes)
    if (present.length === 0) return false
    await this.commit([
      ...legacyRemoval(present.filter((k) => k in where.row)),
      ...(where.bridge
        ? [
            OVS.mutate(
              'Bridge',
              [['name', '==', this.notesBridge]],
              [['external_ids', 'delete', present]],
            ),
          ]
        : []),
    ])
    return true
  }

  /**
   * The two places of the agent's notes, read in one transaction and no more: the
   * Open_vSwitch row's external_ids and the notes bridge's (undefined: no such bridge).
   */
  private async readNotes(): Promise<{
    readonly row: Readonly<Record<string, string>>
    readonly bridge: Readonly<Record<string, string>> | undefined
    readonly notes: Readonly<Record<string, string>>
  }> {
    const [root, bridge] = await this.client.transact(OVS.name, [
      OVS.select('Open_vSwitch', [], ['external_ids']),
      OVS.select('Bridge', [['name', '==', this.notesBridge]], ['external_ids']),
    ])
    const row = OVS.decodeRows('Open_vSwitch', root?.rows)[0]?.external_ids ?? {}
    const ids = OVS.decodeRows('Bridge', bridge?.rows)[0]?.external_ids
    return { row, bridge: ids, notes: notesOf(row, ids) }
  }

  /** The Open_vSwitch row's other_config (where `ovs-monitor-ipsec` reads its PKI). */
  async otherConfig(): Promise<Readonly<Record<string, string>>> {
    const [result] = await this.client.transact(OVS.name, [
      OVS.select('Open_vSwitch', [], ['other_config']),
    ])
    return OVS.decodeRows('Open_vSwitch', result?.rows)[0]?.other_config ?? {}
  }

  /**
   * Makes the Open_vSwitch row's other_config hold `set` and not `remove` (other keys are
   * kept), in one transaction; true when anything changed.
   */
  async setOtherConfig(
    set: Readonly<Record<string, string>>,
    remove: readonly string[] = [],
  ): Promise<boolean> {
    const now = await this.otherConfig()
    const changed = Object.entries(set).filter(([k, v]) => now[k] !== v)
    const gone = remove.filter((k) => k in now && !(k in set))
    if (changed.length === 0 && gone.length === 0) return false
    await this.commit([
      OVS.mutate(
        'Open_vSwitch',
        [],
        [
          ['other_config', 'delete', [...changed.map(([k]) => k), ...gone]],
          ['other_config', 'insert', Object.fromEntries(changed)],
        ],
      ),
    ])
    return true
  }

  /**
   * Makes port `name` exist on `bridge` with the given interface settings, when
   * `claimPort` grants it: a port that does not exist is created; one that is already the
   * agent's, for the same owner, has its other settings corrected. Otherwise nothing is
   * written and the refusing claim is returned (the caller throws what fits).
   */
  async ensurePort(spec: PortSpec): Promise<Claim> {
    const claim = claimPort((await this.snapshot()).ports.get(spec.name), claimOf(spec))
    if (!granted(claim)) return claim
    if (claim.verdict === 'create') {
      await this.commit([
        OVS.insert(
          'Interface',
          {
            name: spec.name,
            type: spec.type,
            external_ids: spec.externalIds,
            ...(spec.mac ? { mac: spec.mac } : {}),
            ...(spec.mtu ? { mtu_request: spec.mtu } : {}),
          },
          'iface',
        ),
        OVS.insert(
          'Port',
          { name: spec.name, interfaces: ['iface'], external_ids: spec.externalIds },
          'port',
        ),
        OVS.mutate('Bridge', [['name', '==', spec.bridge]], [['ports', 'insert', ['port']]]),
      ])
      return claim
    }
    const [ifaceResult] = await this.client.transact(OVS.name, [
      OVS.select('Interface', [['name', '==', spec.name]]),
    ])
    const iface = OVS.decodeRows('Interface', ifaceResult?.rows)[0]
    if (!iface) return claim
    const ops = []
    const stale = Object.entries(spec.externalIds).filter(([k, v]) => iface.external_ids[k] !== v)
    if (stale.length > 0) {
      ops.push(
        OVS.mutate(
          'Interface',
          [['name', '==', spec.name]],
          [
            ['external_ids', 'delete', stale.map(([k]) => k)],
            ['external_ids', 'insert', Object.fromEntries(stale)],
          ],
        ),
      )
    }
    const row: Partial<OvsInterface> = {}
    if (spec.type !== iface.type) row.type = spec.type
    if (spec.mac && iface.mac !== spec.mac) row.mac = spec.mac
    if (spec.mtu && iface.mtu_request !== spec.mtu) row.mtu_request = spec.mtu
    if (Object.keys(row).length > 0)
      ops.push(OVS.update('Interface', [['name', '==', spec.name]], row))
    if (ops.length > 0) await this.commit(ops)
    return claim
  }

  /**
   * Removes port `name` from `bridge` (and from no other). True when it was there. The
   * agent calls it only for ports its snapshot shows it owns.
   */
  async deletePort(name: string, bridge: string): Promise<boolean> {
    const [portResult, bridgeResult] = await this.client.transact(OVS.name, [
      OVS.select('Port', [['name', '==', name]], ['_uuid']),
      OVS.select('Bridge', [['name', '==', bridge]], ['ports']),
    ])
    const port = OVS.decodeRows('Port', portResult?.rows)[0]
    const holder = OVS.decodeRows('Bridge', bridgeResult?.rows)[0]
    if (!port || !holder?.ports.includes(port._uuid)) return false
    // Port and Interface are not root tables: dropping the reference deletes them.
    await this.commit([
      OVS.mutate('Bridge', [['name', '==', bridge]], [['ports', 'delete', [port._uuid]]]),
    ])
    return true
  }

  private async commit(ops: Parameters<OvsdbClient['transact']>[1]): Promise<void> {
    await this.client.transact(OVS.name, ops)
  }
}

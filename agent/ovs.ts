/**
 * The agent's view of its local Open_vSwitch database, through lib/ovn's OVSDB client:
 * read what is there, and converge bridges, chassis settings and ports to what a job
 * wants, one transaction per step. Every port the agent creates carries
 * `hydrazine:*` external_ids, so that it only ever touches its own ports.
 */
import {
  Database,
  OvsdbClient,
  type OvsInterface,
  type OvsPort,
  type OvsTables,
  ovsSchema,
} from '../lib/ovn/index.ts'

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

export type PortRole = 'host' | 'dhcp-relay'

/** One agent-owned port of the integration bridge, as the database holds it. */
export interface OwnedPort {
  readonly name: string
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
  readonly bridges: readonly string[]
  /** Bridge name → its port names. */
  readonly bridgePorts: Readonly<Record<string, readonly string[]>>
  readonly owned: readonly OwnedPort[]
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
  /** Must hold after the call; other keys (e.g. ovn-installed) are left alone. */
  readonly externalIds: Readonly<Record<string, string>>
}

/** Reads and converges the local Open_vSwitch database. */
export class LocalOvs {
  private constructor(readonly client: OvsdbClient) {}

  static async connect(remote: string): Promise<LocalOvs> {
    return new LocalOvs(await OvsdbClient.connect(remote, { connectTimeoutMs: 15_000 }))
  }

  close(): Promise<void> {
    return this.client.close()
  }

  async snapshot(): Promise<OvsSnapshot> {
    const [ovs, bridges, ports, ifaces] = await this.client.transact(OVS.name, [
      OVS.select('Open_vSwitch', [], ['external_ids']),
      OVS.select('Bridge', [], ['name', 'ports']),
      OVS.select('Port', [], ['_uuid', 'name']),
      OVS.select('Interface', [], ['name', 'external_ids', 'ofport']),
    ])
    const root = OVS.decodeRows('Open_vSwitch', ovs?.rows)[0]
    const ids = root?.external_ids ?? {}
    const portNames = new Map(
      OVS.decodeRows('Port', ports?.rows).map((p: OvsPort) => [p._uuid, p.name]),
    )
    const bridgeRows = OVS.decodeRows('Bridge', bridges?.rows)
    const owned: OwnedPort[] = []
    for (const i of OVS.decodeRows('Interface', ifaces?.rows) as OvsInterface[]) {
      const role = i.external_ids[Key.role]
      if (role !== 'host' && role !== 'dhcp-relay') continue
      owned.push({
        name: i.name,
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
      bridges: bridgeRows.map((b) => b.name).sort(),
      bridgePorts: Object.fromEntries(
        bridgeRows.map((b) => [b.name, b.ports.map((u) => portNames.get(u) ?? u).sort()]),
      ),
      owned: owned.sort((a, b) => a.name.localeCompare(b.name)),
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

  /**
   * Makes port `name` exist on `bridge` with the given interface settings. A port of
   * that name elsewhere is moved; an interface with stale external_ids is corrected.
   */
  async ensurePort(spec: PortSpec): Promise<void> {
    const [ifaceResult, portResult, bridgeResult] = await this.client.transact(OVS.name, [
      OVS.select('Interface', [['name', '==', spec.name]]),
      OVS.select('Port', [['name', '==', spec.name]], ['_uuid']),
      OVS.select('Bridge', [['name', '==', spec.bridge]], ['ports']),
    ])
    const iface = OVS.decodeRows('Interface', ifaceResult?.rows)[0]
    const port = OVS.decodeRows('Port', portResult?.rows)[0]
    const bridge = OVS.decodeRows('Bridge', bridgeResult?.rows)[0]
    if (!bridge) throw new Error(`bridge ${spec.bridge} is missing`)
    if (!iface || !port) {
      const ops = []
      if (port) ops.push(...this.deletePortOps(port._uuid))
      ops.push(
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
      )
      await this.commit(ops)
      return
    }
    const ops = []
    if (!bridge.ports.includes(port._uuid)) {
      ops.push(...this.deletePortOps(port._uuid))
      ops.push(
        OVS.mutate('Bridge', [['name', '==', spec.bridge]], [['ports', 'insert', [port._uuid]]]),
      )
    }
    const stale = Object.entries(spec.externalIds).filter(([k, v]) => iface.external_ids[k] !== v)
    if (stale.length > 0) {
      // A new iface-id must not inherit the old binding's ovn-installed.
      const drop = [...stale.map(([k]) => k), Key.ovnInstalled, 'ovn-installed-ts']
      ops.push(
        OVS.mutate(
          'Interface',
          [['name', '==', spec.name]],
          [
            ['external_ids', 'delete', drop],
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
  }

  /** Removes port `name` from whatever bridge holds it. True when there was one. */
  async deletePort(name: string): Promise<boolean> {
    const [portResult] = await this.client.transact(OVS.name, [
      OVS.select('Port', [['name', '==', name]], ['_uuid']),
    ])
    const port = OVS.decodeRows('Port', portResult?.rows)[0]
    if (!port) return false
    await this.commit(this.deletePortOps(port._uuid))
    return true
  }

  private deletePortOps(portUuid: string) {
    // Port and Interface are not root tables: dropping the reference deletes them.
    return [
      OVS.mutate('Bridge', [['ports', 'includes', portUuid]], [['ports', 'delete', [portUuid]]]),
    ]
  }

  private async commit(ops: Parameters<OvsdbClient['transact']>[1]): Promise<void> {
    await this.client.transact(OVS.name, ops)
  }
}

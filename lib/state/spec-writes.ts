/**
 * Writing an object's desired spec: one run of `lua/put-spec.lua` per write, which bumps
 * `specVersion` only when the spec changed and, atomically with the write, keeps the
 * object's indexes, exclusive claims (a DPU's NAT IP, host port, fabric IPs), guards (the
 * DPU version a host was placed against, a DPU not in use) and quotas. What each kind of
 * object claims and guards is decided here; a refusal is a `StoreConflict` or
 * `QuotaExceeded` and writes nothing.
 */

import { HydrazineError } from '../errors.ts'
import { implementationOf } from '../model/network-implementation.ts'
import type {
  Dpu,
  DpuSpec,
  DpuStatus,
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
} from '../model/objects.ts'
import type { QuotaLimits, TenantQuota } from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { ObjectRecords } from './object-records.ts'
import {
  type CentralsGuard,
  checkQuotas,
  checkQuotasTogether,
  hostQuotaWrite,
  type QuotaGuard,
  quotaFailure,
  quotaGuards,
} from './quotas.ts'
import type { Kind, StoreKeys } from './store-keys.ts'

const putSpecScript = new LuaScript(new URL('./lua/put-spec.lua', import.meta.url))

/** The request conflicts with stored state (HTTP 409). */
export class StoreConflict extends HydrazineError {
  constructor(
    message: string,
    readonly reason: 'Terminating' | 'Immutable' | 'Claimed' | 'InUse' | 'Changed' | 'Owned',
  ) {
    super('CONFLICT', message)
  }
}

export interface PutResult<T> {
  /** False when the spec was already stored as given: nothing to do. */
  readonly changed: boolean
  readonly object: T
}

/** One spec write, as `put-spec.lua` takes it. */
interface SpecWrite {
  readonly kind: Kind
  readonly name: string
  readonly spec: unknown
  readonly initialStatus: unknown
  /** The parts of the spec that may never change (a fingerprint). */
  readonly immutable: string
  readonly indexes: string[]
  readonly claims: string[]
  readonly guards?: (
    | { key: string; absent: true }
    | { key: string; live: true }
    | { key: string; field: string; equals: string }
    | QuotaGuard
    | CentralsGuard
  )[]
  /** Sets the name leaves when the spec changes. */
  readonly leaves?: string[]
  /** The refusal of a change of the immutable parts, given the stored fingerprint. */
  readonly immutableMessage: string | ((stored: string) => string)
  readonly inUseMessage?: string
}

/** How a claim's kind reads in a conflict message. */
const CLAIM_WHAT: Readonly<Record<string, string>> = {
  natip: 'NAT IP',
  fabricip: 'fabric IP',
  dpuport: 'DPU host port',
  dnsname: 'DNS name',
}

export class SpecWrites {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords

  constructor(redis: RedisClient, keys: StoreKeys, records: ObjectRecords) {
    this.#redis = redis
    this.#keys = keys
    this.#records = records
  }

  /**
   * A group's spec; a new group counts against its tenant's `groups` quota. It takes no
   * OVN central slot: its first host does (`host`'s `central`).
   */
  async group(
    name: string,
    spec: ResourceGroupSpec,
    limits?: QuotaLimits,
  ): Promise<PutResult<ResourceGroup>> {
    const initial: ResourceGroupStatus = {
      phase: 'Provisioning',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      observedVersion: 0,
      configsSynced: false,
    }
    const keys = this.#keys
    const immutable = await this.#groupFingerprint(name, spec)
    const changed = await this.#put({
      kind: 'rg',
      name,
      spec,
      initialStatus: initial,
      immutable,
      indexes: [keys.index('rg'), keys.tenantGroups(spec.tenantId)],
      claims: [],
      guards: limits ? quotaGuards(keys.prefix, { tenant: spec.tenantId, limits }, ['groups']) : [],
      immutableMessage: (stored) => groupImmutableMessage(name, stored, immutable),
    })
    return { changed, object: await this.#records.mustGet('rg', name) }
  }

  /**
   * A group's immutable parts: `[tenantId, network, 'Fabric' | null]` (null: Overlay, as
   * groups stored before `networkImplementationType` are). A group stored with the
   * retired `implementation: SharedCentral` (an Overlay group: no code read it) keeps its
   * stored fingerprint while it stays Overlay.
   */
  async #groupFingerprint(name: string, spec: ResourceGroupSpec): Promise<string> {
    const fabric = implementationOf(spec) === 'Fabric' ? 'Fabric' : null
    const fingerprint = JSON.stringify([spec.tenantId, spec.network, fabric])
    if (fabric) return fingerprint
    const legacy = JSON.stringify([spec.tenantId, spec.network, 'SharedCentral'])
    const stored = await this.#redis.hget(this.#keys.object('rg', name), 'immutable')
    return stored === legacy ? legacy : fingerprint
  }

  /**
   * A host's resolved spec, placed against version `dpuVersion` of its DPU; it claims its
   * DPU port and, when its access uses it, the DPU's NAT IP, and counts against quotas.
   * An admin port (`adminPort`, the admin network's port of a host port no tenant host
   * holds) claims no DPU port and is not one of the DPU's hosts (`dpuHosts`): a tenant
   * host may be placed there, and the DPU's inventory entry changes, while it is on.
   * `maxCentrals` (centrals run on demand, an Overlay group): the host's group takes one
   * of the site's OVN central slots unless it holds one already, refused
   * (`CentralsExhausted`, nothing written) when all are taken.
   */
  async host(
    name: string,
    spec: ManagedResourceSpec,
    dpuVersion: number,
    quota: TenantQuota,
    options: {
      readonly adminPort?: boolean
      readonly maxCentrals?: number
      readonly fabric?: boolean
    } = {},
  ): Promise<PutResult<ManagedResource>> {
    const adminPort = options.adminPort ?? false
    const initial: ManagedResourceStatus = {
      phase: 'Attaching',
      conditions: [],
      observedVersion: 0,
      configsSynced: false,
    }
    const keys = this.#keys
    const counted = hostQuotaWrite(keys.prefix, spec, quota)
    const changed = await this.#put({
      kind: 'mr',
      name,
      spec,
      initialStatus: initial,
      immutable: hostImmutable(spec),
      indexes: [
        keys.index('mr'),
        keys.members(spec.resourceGroup),
        adminPort ? keys.dpuAdminPorts(spec.dpu.id) : keys.dpuHosts(spec.dpu.id),
        ...counted.guards.map((g) => g.key),
      ],
      leaves: counted.leaves,
      claims: this.#hostClaims(name, spec, adminPort, options.fabric),
      guards: [
        { key: keys.object('dpu', spec.dpu.id), field: 'specVersion', equals: String(dpuVersion) },
        // The group is read before this write: a host must not join one that was deleted
        // meanwhile (its name could be another tenant's group next).
        { key: keys.object('rg', spec.resourceGroup), live: true },
        ...counted.guards,
        ...(options.maxCentrals === undefined
          ? []
          : [
              {
                key: keys.centrals,
                fewerThan: options.maxCentrals,
                member: spec.resourceGroup,
                centrals: true as const,
              },
            ]),
      ],
      immutableMessage: hostImmutableMessage(name),
    })
    return { changed, object: await this.#records.mustGet('mr', name) }
  }

  /**
   * The claims a host makes: its DPU port, its name in its group's DNS (`<hostname>.<group>`)
   * and, when its access uses it, the DPU's NAT IP (never a Fabric group's host's: no NAT).
   */
  #hostClaims(
    name: string,
    spec: ManagedResourceSpec,
    adminPort = false,
    fabric = false,
  ): string[] {
    const natIps = spec.hostAccess !== 'None' && !fabric ? [spec.dpu.ips[1], spec.dpu.natIp6] : []
    const port = spec.identifier && !adminPort ? spec.identifier : undefined
    return [
      ...natIps.flatMap((ip) => (ip ? [this.#keys.claim(`natip:${ip}`)] : [])),
      ...(port ? [this.#keys.claim(`dpuport:${spec.dpu.id}/${port}`)] : []),
      this.#keys.claim(`dnsname:${spec.hostname ?? name}.${spec.resourceGroup}`),
    ]
  }

  /**
   * The refusal of a claim another object holds. The holder is not named: it may be
   * another tenant's object.
   */
  #claimed(key: string): StoreConflict {
    const [what, value] = key.slice(this.#keys.claim('').length).split(/:(.*)/s)
    return new StoreConflict(
      `${CLAIM_WHAT[what ?? ''] ?? what} ${value} is already in use`,
      'Claimed',
    )
  }

  /**
   * Refuses (StoreConflict) what `host` would refuse for the host being deleted, its
   * immutable parts or its claims, writing nothing: a dry run's check. (The write itself
   * checks again, atomically.)
   */
  async checkHost(
    name: string,
    spec: ManagedResourceSpec,
    known?: { readonly existing: ManagedResource | undefined; readonly fabric?: boolean },
  ): Promise<void> {
    const existing = known ? known.existing : await this.#records.get<ManagedResource>('mr', name)
    if (existing?.deletion) {
      throw new StoreConflict(`${name} is being deleted; it cannot change`, 'Terminating')
    }
    if (existing && hostImmutable(existing.spec) !== hostImmutable(spec)) {
      throw new StoreConflict(hostImmutableMessage(name), 'Immutable')
    }
    const claims = this.#hostClaims(name, spec, false, known?.fabric)
    const holders = claims.length > 0 ? await this.#redis.mget(...claims) : []
    for (const [i, holder] of holders.entries()) {
      if (holder === null || holder === name) continue
      throw this.#claimed(claims[i] ?? '')
    }
  }

  /** Refuses (QuotaExceeded) what `host` would refuse for a quota, writing nothing. */
  checkHostQuotas(name: string, spec: ManagedResourceSpec, quota: TenantQuota): Promise<void> {
    return checkQuotas(this.#redis, name, hostQuotaWrite(this.#keys.prefix, spec, quota).guards)
  }

  /** Refuses (QuotaExceeded) hosts that would not fit the tenant's quotas together. */
  checkHostsQuotas(
    hosts: readonly { readonly name: string; readonly spec: ManagedResourceSpec }[],
    quota: TenantQuota,
  ): Promise<void> {
    return checkQuotasTogether(
      this.#redis,
      hosts.map(({ name, spec }) => ({
        name,
        guards: hostQuotaWrite(this.#keys.prefix, spec, quota).guards,
      })),
    )
  }

  /**
   * A DPU's inventory entry: its fabric IPs and tenant change only while it serves no
   * host, a host port only while no host uses it; its fabric IPs are its own.
   */
  async dpu(id: string, spec: DpuSpec): Promise<PutResult<Dpu>> {
    const keys = this.#keys
    const current = await this.#records.get<Dpu>('dpu', id)
    const removedPorts = (current?.spec.hostPorts ?? []).filter((p) => !spec.hostPorts.includes(p))
    const placementChanged =
      current !== undefined &&
      (JSON.stringify(current.spec.fabricIps) !== JSON.stringify(spec.fabricIps) ||
        current.spec.natIp6 !== spec.natIp6 ||
        current.spec.tenantId !== spec.tenantId)
    const changed = await this.#put({
      kind: 'dpu',
      name: id,
      spec,
      initialStatus: { hosts: [] } satisfies DpuStatus,
      immutable: '[]',
      indexes: [keys.index('dpu')],
      claims: [...spec.fabricIps, ...(spec.natIp6 ? [spec.natIp6] : [])].map((ip) =>
        keys.claim(`fabricip:${ip}`),
      ),
      guards: [
        ...(placementChanged ? [{ key: keys.dpuHosts(id), absent: true as const }] : []),
        ...removedPorts.map((p) => ({
          key: keys.claim(`dpuport:${id}/${p}`),
          absent: true as const,
        })),
      ],
      immutableMessage: '',
      inUseMessage: `DPU ${id} serves hosts: its fabric IPs, IPv6 NAT address, tenant and used host ports cannot change until they are deleted`,
    })
    if (current?.spec.tenantId !== spec.tenantId) {
      if (current?.spec.tenantId) await this.#redis.srem(keys.tenantDpus(current.spec.tenantId), id)
      if (spec.tenantId) await this.#redis.sadd(keys.tenantDpus(spec.tenantId), id)
    }
    return { changed, object: await this.#records.mustGet('dpu', id) }
  }

  /** Runs `put-spec.lua`; true when the spec changed, a refusal thrown as its error. */
  async #put(put: SpecWrite): Promise<boolean> {
    const keys = this.#keys
    const guards = put.guards ?? []
    const leaves = put.leaves ?? []
    const log = this.#records.log.change(put.kind, put.name)
    const reply = (await putSpecScript.run(
      this.#redis,
      [
        keys.object(put.kind, put.name),
        keys.version(put.kind, put.name),
        ...put.indexes,
        ...put.claims,
        ...guards.map((g) => g.key),
        ...leaves,
        log.key,
      ],
      [
        put.name,
        JSON.stringify(put.spec),
        new Date().toISOString(),
        JSON.stringify(put.initialStatus),
        put.immutable,
        put.indexes.length,
        keys.claim(''),
        put.claims.length,
        JSON.stringify(guards.map(({ key: _key, ...guard }) => guard)),
        leaves.length,
        log.keep,
        ...log.fields,
      ],
    )) as [string, ...(string | number)[]]
    switch (reply[0]) {
      case 'ok':
        return Number(reply[1]) === 1
      case 'terminating':
        throw new StoreConflict(`${put.name} is being deleted; it cannot change`, 'Terminating')
      case 'immutable': {
        const message = put.immutableMessage
        throw new StoreConflict(
          typeof message === 'string' ? message : message(String(reply[1])),
          'Immutable',
        )
      }
      case 'claimed':
        throw this.#claimed(String(reply[1]))
      case 'quota':
        throw quotaFailure(guards, String(reply[1]))
      case 'guard': {
        // A version guard (the host's DPU, read when the request was checked) that moved
        // is a retryable change; any other guard (a DPU's hosts) is the object in use.
        const key = String(reply[1])
        const guard = guards.find((g) => g.key === key)
        if (guard && 'live' in guard) {
          throw new StoreConflict(
            `the resource group of ${put.name} is gone or being deleted`,
            'Terminating',
          )
        }
        if (guard && 'field' in guard && guard.field === 'specVersion') {
          throw new StoreConflict(
            'the DPU changed while the request was checked against it; send it again',
            'Changed',
          )
        }
        throw new StoreConflict(put.inUseMessage ?? `${put.name} is in use`, 'InUse')
      }
      default:
        throw new Error(`unexpected put-spec reply ${JSON.stringify(reply)}`)
    }
  }
}

/** The refusal of a group change, naming each immutable field the change differs in. */
function groupImmutableMessage(name: string, stored: string, asked: string): string {
  const fields = ['tenantId', 'network', 'networkImplementationType']
  const was = parseFingerprint(stored)
  const now = parseFingerprint(asked)
  const differ = fields.filter((_, i) => JSON.stringify(was[i]) !== JSON.stringify(now[i]))
  const named = differ.length > 0 ? differ : fields
  return `${named.join(', ')} of resource group ${name} cannot change (${fields.join(', ')} are immutable); delete the group and create it again`
}

/** A stored group fingerprint's parts; `SharedCentral` (retired) and null read as Overlay. */
function parseFingerprint(fingerprint: string): unknown[] {
  const parts = JSON.parse(fingerprint) as unknown[]
  return [parts[0], parts[1], parts[2] === 'Fabric' ? 'Fabric' : 'Overlay']
}

/** The parts of a host's spec that never change: its group, DPU and host port. */
function hostImmutable(spec: ManagedResourceSpec): string {
  return JSON.stringify([spec.resourceGroup, spec.dpu.id, spec.identifier ?? null])
}

function hostImmutableMessage(name: string): string {
  return `managed resource ${name} cannot move to another resource group, DPU or host port; delete it first`
}

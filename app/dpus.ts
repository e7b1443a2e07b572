/**
 * A DPU request on the operator's inventory, decided once: `prepare` settles who may ask
 * (operators only) and validation; `apply` stores it. Its fabric IPs and IPv6 NAT address
 * (stored canonical) are unique among DPUs; they and its tenant cannot change while it
 * serves hosts (409, as the store writes). Deleting one and issuing its credentials are
 * here too.
 */
import type { DpuCredentialIssuer, DpuCredentials } from '../lib/agent-protocol/credentials.ts'
import type { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import { redriveHost } from '../lib/jobs/redrive.ts'
import { DpuId } from '../lib/model/labels.ts'
import { type Dpu, DpuSpec, Rfc1123Label } from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import { admittedNatIpMessage, natIpsAdmitted } from '../lib/model/southbound-admission.ts'
import { type HeldPublicIps, releaseIsolationHolds } from '../lib/state/isolation-holds.ts'
import type { StateStore } from '../lib/state/store.ts'
import type { ControllerQueue } from '../queues/producer.ts'
import {
  CredentialsUnavailable,
  ForbiddenError,
  NotFoundError,
  ValidationError,
  validate,
} from './errors.ts'
import type { ClientPolicy } from './policy.ts'

/** A DPU request that passed every check: what `apply` stores. */
export interface PreparedDpu {
  readonly id: string
  readonly spec: DpuSpec
}

export interface DpuDeps {
  readonly store: StateStore
  readonly queue: ControllerQueue
  readonly heartbeats: Pick<Heartbeats, 'forget'>
  /** The public-IP pool, for what a deleted DPU's pending isolations held. */
  readonly ipam: HeldPublicIps
  readonly credentials?: DpuCredentialIssuer | undefined
  /** The operator's rules a DPU's addresses must follow (`southboundCidrs`). */
  readonly policy?: Pick<ClientPolicy, 'southboundCidrs'>
}

export class DpuRequests {
  readonly #deps: DpuDeps

  constructor(deps: DpuDeps) {
    this.#deps = deps
  }

  /** Refuses a tenant (403) and a malformed id or spec (400); reads nothing. */
  prepare(caller: Caller, id: string, spec: unknown): PreparedDpu {
    if (caller.kind !== 'operator') throw new ForbiddenError()
    validate(DpuId, id, 'id')
    const valid = validate(DpuSpec, spec)
    const admitted = natIpsAdmitted(valid, this.#deps.policy?.southboundCidrs ?? [])
    if (admitted.length > 0) {
      throw new ValidationError(
        admitted.map((a) => ({ path: a.field, message: admittedNatIpMessage(a) })),
      )
    }
    return { id, spec: valid }
  }

  /** The prepared entry stored; `changed` false when the inventory held it already. */
  async apply(prepared: PreparedDpu): Promise<{ object: Dpu; changed: boolean }> {
    const { changed, object } = await this.#deps.store.dpus.put(prepared.id, prepared.spec)
    return { object, changed }
  }

  /**
   * Removes a DPU from the inventory; refused (409) while it serves a host. Its credentials
   * stop working. What its pending isolations held (a Fabric host force-detached while it
   * was silent: the addresses it leaked, its public IPs) is given back: the DPU is gone, or
   * the operator re-provisions it. A DELETE run again after a cut gives back what is left.
   */
  async delete(id: string): Promise<void> {
    const { store, heartbeats, credentials, ipam } = this.#deps
    validate(Rfc1123Label, id, 'id')
    if (!(await store.dpus.get(id))) {
      await releaseIsolationHolds({ store, ipam }, id)
      throw new NotFoundError('DPU', id)
    }
    await store.dpus.delete(id)
    await releaseIsolationHolds({ store, ipam }, id)
    // Gone from the inventory, it is no longer listed as a DPU once seen.
    await heartbeats.forget(id)
    await store.dpuHealth.remove(id)
    await credentials?.revoke(id)
  }

  /**
   * New credentials for a DPU of the inventory (operators only): a Redis user confined to
   * its own queue and heartbeat and, with a PKI, its certificate. The old ones stop working.
   * The answer is the only place the secrets appear. With a certificate, the DPU's hosts
   * are configured again (`reconfigureHostsOf`).
   */
  async issueCredentials(id: string): Promise<DpuCredentials> {
    const { store, credentials } = this.#deps
    validate(Rfc1123Label, id, 'id')
    if (!(await store.dpus.get(id))) throw new NotFoundError('DPU', id)
    if (!credentials) throw new CredentialsUnavailable()
    const issued = await credentials.issue(id)
    // Revoked for what it held in the agents' Redis: its hosts are healthy again once it beats.
    await store.dpuHealth.clearRevoked(id)
    if (issued.tls) {
      // Public: kept so that each group's own central can certify the DPU's key for its SB.
      await store.dpus.setIdentity(id, issued.tls.cert)
      await this.#reconfigureHostsOf(id)
    }
    return issued
  }

  /**
   * A DPU with a new key: what its group's SB admits certifies the old one, so each of its
   * live hosts starts a new attempt, whose `configure` carries a certificate for the new
   * key (the new agent takes it). A host that failed for want of a certificate on record
   * (`ChassisIdentityRefused`) is tried again the same way.
   */
  async #reconfigureHostsOf(dpuId: string): Promise<void> {
    const { store, queue } = this.#deps
    const message = `DPU ${dpuId} has new credentials: configuring it again`
    for (const host of await store.hosts.onDpu(dpuId)) {
      if (host.deletion) continue
      const refused = host.status.conditions.some((c) => c.reason === 'ChassisIdentityRefused')
      if (host.status.phase === 'Failed' && !refused) continue
      const configured = host.status.phase === 'Ready' || host.status.phase === 'Configuring'
      await redriveHost(
        { store, jobs: queue.jobs },
        host.name,
        { type: 'AgentConfigured', status: 'Unknown', reason: 'CredentialsIssued', message },
        configured ? 'Configuring' : 'Attaching',
      )
    }
  }
}

/**
 * A group request, decided once: `prepare` settles tenancy (a tenant writes only its own
 * tenant's groups, and a name another tenant holds is taken), validation (the DHCP server
 * one the operator relays to), its network implementation and the addresses its hosts
 * hold; `apply` stores it and enqueues `group.create` (the same spec applied again to a
 * Failed group starts a new attempt; a new group past its tenant's `groups` quota is
 * refused as it is stored); `plan` answers a dry run from the same prepared request.
 * Deleting a group marks it and enqueues `group.delete`.
 */
import { IPV6_OWNERS, networkSpecOf } from '../lib/ipam/group-network.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import { deletionVersion } from '../lib/jobs/index.ts'
import { redriveGroup } from '../lib/jobs/redrive.ts'
import { attemptOf } from '../lib/model/attempts.ts'
import {
  cidrContains,
  implementationOf,
  type ResourceGroup,
  ResourceGroupSpec,
  Rfc1123Label,
} from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import type { ChangePlan, Planner } from '../lib/model/plans.ts'
import type { StateStore } from '../lib/state/store.ts'
import type { ControllerQueue } from '../queues/producer.ts'
import { refuseAdminGroup } from './admin-network.ts'
import {
  AddressesHeld,
  ForbiddenError,
  ImmutableField,
  NameTaken,
  NotFoundError,
  ValidationError,
  validate,
} from './errors.ts'
import { type Accepted, plannerOf, sameSpecAgain } from './outcomes.ts'
import { type ClientPolicy, quotaOf } from './policy.ts'

/** A group request that passed every check: what `apply` stores and `plan` plans. */
export interface PreparedGroup {
  readonly name: string
  readonly spec: ResourceGroupSpec
}

export interface GroupDeps {
  readonly store: StateStore
  readonly queue: ControllerQueue
  readonly policy: ClientPolicy
  /** Refuses a group change that would orphan a held address (409) before it is stored. */
  readonly addresses: Pick<Ipam, 'orphans'>
  readonly planner?: Planner | undefined
}

export class GroupRequests {
  readonly #deps: GroupDeps

  constructor(deps: GroupDeps) {
    this.#deps = deps
  }

  /**
   * Everything a group write decides, refused (nothing stored) at the first check it
   * fails: a tenant writing for another tenant (403) or to a name another tenant holds
   * (409), a malformed spec, a DHCP server the operator does not relay to, a changed
   * `networkImplementationType` (409), a held address the new network would leave behind
   * (409). A spec without `networkImplementationType` gets the group's own, else the
   * operator's default: the prepared spec always has one.
   */
  async prepare(caller: Caller, name: string, spec: unknown): Promise<PreparedGroup> {
    const read = () => this.#deps.store.groups.get(name)
    // A tenant's tenancy is decided before its body is; an operator's body before any read.
    let existing: ResourceGroup | undefined
    if (caller.kind === 'tenant') {
      existing = await read()
      refuseForeign(caller.tenant, name, spec, existing)
      refuseAdminGroup(this.#deps.policy, caller, name, existing, spec)
    }
    const valid = validGroupSpec(name, spec, this.#deps.policy)
    if (caller.kind !== 'tenant') {
      existing = await read()
      refuseAdminGroup(this.#deps.policy, caller, name, existing, spec)
    }
    // Left out: the group's own (a PUT of an existing group), else the operator's default.
    const type =
      valid.networkImplementationType ??
      (existing ? implementationOf(existing.spec) : this.#deps.policy.defaultNetworkImplementation)
    // The store refuses it too, atomically: this names the field before anything is stored.
    if (existing && type !== undefined && type !== implementationOf(existing.spec)) {
      throw new ImmutableField([
        {
          path: 'networkImplementationType',
          message: `resource group ${name} is ${implementationOf(existing.spec)}: it cannot become ${type}; delete it and create it again`,
        },
      ])
    }
    // IPAM's commit refuses the same atomically (the group Failed): this answers at once.
    await refuseOrphans(this.#deps.addresses, name, valid)
    return { name, spec: { ...valid, networkImplementationType: type ?? 'Overlay' } }
  }

  /** The prepared spec stored; `group.create` enqueued when it changed or is tried again. */
  async apply(prepared: PreparedGroup): Promise<Accepted<ResourceGroup>> {
    const { store, queue, policy } = this.#deps
    const { name, spec } = prepared
    const { limits } = quotaOf(policy, spec.tenantId)
    const { changed, object } = await store.groups.put(name, spec, limits)
    if (!changed) {
      if (object.status.phase === 'Provisioning' && attemptOf(object.status) === 1) {
        // Stored by an earlier request that failed before its job was queued (Redis went
        // away between the two), and this is its client trying again: queued now.
        const id = await queue.convergeIfMissing('group.create', name, object.specVersion, {
          group: name,
          specVersion: object.specVersion,
        })
        return { object, ...(id ? { jobId: id } : {}) }
      }
      if (object.status.phase !== 'Failed') return { object }
      const jobs = { store, jobs: queue.jobs }
      const id = await redriveGroup(jobs, name, sameSpecAgain('OvnConfigured'))
      return { object: (await store.groups.get(name)) ?? object, ...(id ? { jobId: id } : {}) }
    }
    const id = await queue.converge('group.create', name, object.specVersion, {
      group: name,
      specVersion: object.specVersion,
    })
    return { object, jobId: id }
  }

  /** What applying the prepared spec would change; nothing is stored or enqueued. */
  plan(prepared: PreparedGroup): Promise<ChangePlan> {
    return plannerOf(this.#deps).group(prepared.name, prepared.spec)
  }

  /** The group marked for deletion and `group.delete` enqueued. */
  async delete(name: string, options: { force?: boolean } = {}): Promise<Accepted<ResourceGroup>> {
    validate(Rfc1123Label, name, 'name')
    const existing = await this.#deps.store.groups.get(name)
    refuseAdminGroup(this.#deps.policy, { kind: 'operator' }, name, existing)
    const force = options.force ?? false
    const object = (await this.#deps.store.objects.requestDeletion('rg', name, force)) as
      | ResourceGroup
      | undefined
    if (!object) throw new NotFoundError('resource group', name)
    const version = deletionVersion(object.specVersion, force)
    const id = await this.#deps.queue.deletion('group.delete', name, version, {
      group: name,
      force,
    })
    return { object, jobId: id }
  }

  /** What deleting the group would change. */
  async planDeletion(name: string): Promise<ChangePlan> {
    validate(Rfc1123Label, name, 'name')
    const plan = await plannerOf(this.#deps).groupDeletion(name)
    if (!plan) throw new NotFoundError('resource group', name)
    return plan
  }
}

/**
 * Refuses (AddressesHeld, 409) a group spec whose network would leave a held address
 * behind, naming the field: the gateway that would take it, or `extraSubnets` when its
 * subnet would go.
 */
export async function refuseOrphans(
  addresses: Pick<Ipam, 'orphans'>,
  name: string,
  spec: ResourceGroupSpec,
): Promise<void> {
  // A host's SLAAC address follows network6: a moved or removed one gives it back.
  const orphans = await addresses.orphans(name, networkSpecOf({ spec }), {
    releaseDropped: IPV6_OWNERS,
  })
  if (orphans.length === 0) return
  const subnets = [
    ...(spec.network ? [{ cidr: spec.network.cidr, path: 'network.gateway' }] : []),
    ...(spec.extraSubnets ?? []).map((s, i) => ({
      cidr: s.cidr,
      path: `extraSubnets.${i}.gateway`,
    })),
    ...(spec.network6 ? [{ cidr: spec.network6.cidr, path: 'network6.gateway' }] : []),
  ]
  throw new AddressesHeld(
    orphans.map(({ ip, owner }) => {
      const subnet = subnets.find((s) => cidrContains(s.cidr, ip))
      const what = subnet ? 'would be the gateway' : 'lies in no subnet of the new spec'
      const path = subnet?.path ?? (ip.includes(':') ? 'network6' : 'extraSubnets')
      return { path, message: `${ip} is held by ${owner} and ${what}` }
    }),
  )
}

/** The refusal of the retired `implementation` field (it had one value, and nothing read it). */
const RETIRED_IMPLEMENTATION =
  'is retired: a group says how it is built with networkImplementationType (Overlay or Fabric); a SharedCentral group is an Overlay group'

/** A group's spec validated, its DHCP server one the operator relays to. */
export function validGroupSpec(name: string, spec: unknown, policy: ClientPolicy) {
  validate(Rfc1123Label, name, 'name')
  if (typeof spec === 'object' && spec !== null && 'implementation' in spec) {
    throw new ValidationError([{ path: 'implementation', message: RETIRED_IMPLEMENTATION }])
  }
  const valid = validate(ResourceGroupSpec, spec)
  if (valid.dhcpServer !== undefined && !policy.dhcpServers.includes(valid.dhcpServer)) {
    throw new ValidationError([
      {
        path: 'dhcpServer',
        message:
          policy.dhcpServers.length === 0
            ? 'no DHCP servers are configured for relaying (HYDRAZINE_DHCP_SERVERS)'
            : `must be one of the operator's DHCP servers: ${policy.dhcpServers.join(', ')}`,
      },
    ])
  }
  return valid
}

/** A tenant writes only for itself, and only to a name no other tenant's group holds. */
function refuseForeign(
  tenant: string,
  name: string,
  spec: unknown,
  existing: ResourceGroup | undefined,
): void {
  const asked =
    typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'tenantId') : undefined
  if (typeof asked === 'string' && asked !== tenant) {
    throw new ForbiddenError(`a ${tenant} token cannot write for ${asked}`)
  }
  if (existing && existing.spec.tenantId !== tenant) throw new NameTaken('resource group', name)
}

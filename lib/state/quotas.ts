/**
 * Per-tenant quotas as the store keeps them (the limits themselves are the model's,
 * `lib/model/quotas.ts`). Each quota counts the members of one Redis set per tenant, kept
 * by the store's spec writes and purges; an object counts from its first write until it
 * is purged (a Terminating one still holds its addresses). The limit is checked by the
 * same Lua script that writes the spec (`lua/put-spec.lua`, a `fewerThan` guard), so two
 * creations racing for a tenant's last slot cannot both pass.
 */

import {
  CentralsExhausted,
  QuotaExceeded,
  type QuotaName,
  type TenantQuota,
} from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'

/** A put-spec guard holding a new member of a tenant's set to its quota. */
export interface QuotaGuard {
  /** The tenant's set for this quota. */
  readonly key: string
  /** The set may have fewer members than this before the write (unless it holds the name). */
  readonly fewerThan: number
  readonly quota: QuotaName
  readonly tenant: string
}

/**
 * A put-spec guard holding the site's running OVN centrals to the operator's
 * `HYDRAZINE_MAX_CENTRALS`, whatever tenant writes: a host of a group that holds no
 * central slot yet takes one (`member`, its group, joins the set) when fewer than
 * `fewerThan` are taken (`centrals.ts`).
 */
export interface CentralsGuard {
  /** The set of groups holding a slot (`StoreKeys.centrals`). */
  readonly key: string
  readonly fewerThan: number
  /** The group whose slot the write takes. */
  readonly member: string
  readonly centrals: true
}

/**
 * The sets each quota counts, one per tenant. `groups` is the store's tenant index
 * (`tenant:<id>`, the names of its groups); `hosts` and `publicIps` hold host names.
 */
export function quotaKeys(prefix: string, tenant: string): Readonly<Record<QuotaName, string>> {
  return {
    groups: `${prefix}tenant:${tenant}`,
    hosts: `${prefix}tenant:${tenant}:hosts`,
    publicIps: `${prefix}tenant:${tenant}:public-access`,
  }
}

/** The guards for writing `quotas` of a tenant (each counts a set the write adds to). */
export function quotaGuards(
  prefix: string,
  { tenant, limits }: TenantQuota,
  quotas: readonly QuotaName[],
): QuotaGuard[] {
  const keys = quotaKeys(prefix, tenant)
  return quotas.map((quota) => ({ key: keys[quota], fewerThan: limits[quota], quota, tenant }))
}

/** Whether a host's spec holds a public IP (counted by `publicIps`). */
const isPublic = (spec: { readonly hostAccess: string }) => spec.hostAccess === 'PublicAccess'

/**
 * How a host's spec write counts: the guards (`hosts`, and `publicIps` with
 * PublicAccess; their sets are the ones it joins) and the sets it leaves (`publicIps`
 * when its access is no longer PublicAccess).
 */
export function hostQuotaWrite(
  prefix: string,
  spec: { readonly hostAccess: string },
  quota: TenantQuota,
): { guards: QuotaGuard[]; leaves: string[] } {
  const counted: QuotaName[] = isPublic(spec) ? ['hosts', 'publicIps'] : ['hosts']
  return {
    guards: quotaGuards(prefix, quota, counted),
    leaves: isPublic(spec) ? [] : [quotaKeys(prefix, quota.tenant).publicIps],
  }
}

/** The tenant's sets a host is counted in (a purged host leaves them). */
export function hostQuotaSets(prefix: string, tenant: string): string[] {
  const keys = quotaKeys(prefix, tenant)
  return [keys.hosts, keys.publicIps]
}

/** The error of the guard put-spec.lua reported full (`{'quota', key}`). */
export function quotaFailure(
  guards: readonly { readonly key: string }[],
  key: string,
): QuotaExceeded | CentralsExhausted {
  const guard = guards.find(
    (g): g is QuotaGuard | CentralsGuard => 'fewerThan' in g && g.key === key,
  )
  if (!guard) throw new Error(`put-spec reported a quota for a key it was not given: ${key}`)
  if ('centrals' in guard) return new CentralsExhausted(guard.fewerThan)
  return new QuotaExceeded(guard.quota, guard.tenant, guard.fewerThan)
}

/**
 * Checks `guards` for `name` without writing: a request refused here never reaches the
 * writes that precede its spec's (a DPU added to the inventory). The put-spec script
 * checks again, atomically, when it writes.
 */
export async function checkQuotas(
  redis: RedisClient,
  name: string,
  guards: readonly QuotaGuard[],
): Promise<void> {
  if (guards.length === 0) return
  const pipeline = redis.pipeline()
  for (const guard of guards) pipeline.sismember(guard.key, name).scard(guard.key)
  const replies = (await pipeline.exec()) ?? []
  guards.forEach((guard, i) => {
    const [memberError, member] = replies[2 * i] ?? []
    const [countError, count] = replies[2 * i + 1] ?? []
    if (memberError || countError) throw memberError ?? countError
    if (Number(member) === 0 && Number(count) >= guard.fewerThan) {
      throw new QuotaExceeded(guard.quota, guard.tenant, guard.fewerThan)
    }
  })
}

/**
 * Checks, without writing, that several objects fit their quotas together: each guard's
 * set, with those of `entries` not in it yet, must stay under its limit.
 */
export async function checkQuotasTogether(
  redis: RedisClient,
  entries: readonly { readonly name: string; readonly guards: readonly QuotaGuard[] }[],
): Promise<void> {
  const byKey = new Map<string, { guard: QuotaGuard; names: string[] }>()
  for (const { name, guards } of entries) {
    for (const guard of guards) {
      const seen = byKey.get(guard.key) ?? { guard, names: [] }
      seen.names.push(name)
      byKey.set(guard.key, seen)
    }
  }
  for (const { guard, names } of byKey.values()) {
    const members = await redis.smismember(guard.key, ...names)
    const newcomers = members.filter((m) => Number(m) === 0).length
    if (newcomers > 0 && (await redis.scard(guard.key)) + newcomers > guard.fewerThan) {
      throw new QuotaExceeded(guard.quota, guard.tenant, guard.fewerThan)
    }
  }
}

/** Hosts that count against the tenant's quotas: `hosts`, and `publicIps` when PublicAccess. */
export async function countHosts(
  redis: RedisClient,
  prefix: string,
  tenant: string,
  hosts: readonly { readonly name: string; readonly spec: { readonly hostAccess: string } }[],
): Promise<void> {
  if (hosts.length === 0) return
  const keys = quotaKeys(prefix, tenant)
  const publicAccess = hosts.filter((h) => h.spec.hostAccess === 'PublicAccess')
  const pipeline = redis.pipeline().sadd(keys.hosts, ...hosts.map((h) => h.name))
  if (publicAccess.length > 0) pipeline.sadd(keys.publicIps, ...publicAccess.map((h) => h.name))
  await pipeline.exec()
}

/** Hosts that leave the tenant without their own purge (their group was purged). */
export async function uncountHosts(
  redis: RedisClient,
  prefix: string,
  tenant: string,
  hosts: readonly string[],
): Promise<void> {
  if (hosts.length === 0) return
  for (const key of hostQuotaSets(prefix, tenant)) await redis.srem(key, ...hosts)
}

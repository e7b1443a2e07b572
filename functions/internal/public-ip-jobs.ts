/**
 * Public IP child jobs: `publicip.allocate` / `publicip.release` on the controller queue
 * (added by host.attach and host.detach), and `announce` / `withdraw` on the FRR queue
 * (added by those two). Ids are deterministic; acks are read with their schemas.
 */
import {
  FRR_QUEUE,
  FrrAck,
  type FrrJobName,
  type FrrPayload,
  frrJobId,
} from '../../lib/jobs/frr.ts'
import { CONTROLLER_QUEUE, jobId, PublicIpResult } from '../../lib/jobs/index.ts'
import type { ManagedResourceSpec } from '../../lib/model/objects.ts'
import type { ChildRef, HandlerDeps } from './deps.ts'
import { type Ack, readAck } from './errors.ts'

/**
 * The DPU's IPv6 NAT address, when the host's access uses it: the host has an IPv6
 * address, its DPU an IPv6 NAT address, and the fabric IPv6 (NAT66 on its gateway router).
 */
export function natIp6Of(
  deps: Pick<HandlerDeps, 'fabric'>,
  spec: Pick<ManagedResourceSpec, 'hostAccess' | 'dpu'>,
  hostIpv6: string | undefined,
): string | undefined {
  if (spec.hostAccess === 'None' || !deps.fabric.dummyIp6 || !hostIpv6) return undefined
  return spec.dpu.natIp6
}

/**
 * For a PublicAccess host, the IPv6 NAT address its public IPv6 is announced via, or
 * undefined when it takes none: its IPv6 must leave the group (`natIp6`), and with a public
 * IPv4 beside (`natIp`) only while the IPv6 pool has any address — with no IPv6 pool at all
 * a dual-stack host's IPv6 leaves through its DPU's NAT address only (an IPv6-only host's
 * allocation fails, saying the pool is exhausted).
 */
export async function publicIpv6Via(
  deps: Pick<HandlerDeps, 'ipam'>,
  natIp: string | undefined,
  natIp6: string | undefined,
): Promise<string | undefined> {
  return natIp6 && (!natIp || (await deps.ipam.hasPublicIps(6))) ? natIp6 : undefined
}

/**
 * The DPU NAT addresses a host's public IPs of `families` go via: its DPU's NAT IP (4) and
 * IPv6 NAT address (6), as the store has them — a job names the host, never an address —
 * or why the host has none for a family it asks for.
 */
export function natAddressesOf(
  host: { readonly name: string; readonly spec: Pick<ManagedResourceSpec, 'dpu'> },
  families: readonly (4 | 6)[],
): NatAddresses | string {
  const { id, ips, natIp6 } = host.spec.dpu
  const natIp = ips[1]
  if (families.includes(4) && !natIp) return `host ${host.name}'s DPU ${id} has no NAT IP`
  if (families.includes(6) && !natIp6) {
    return `host ${host.name}'s DPU ${id} has no IPv6 NAT address`
  }
  return {
    ...(families.includes(4) && natIp ? { natIp } : {}),
    ...(families.includes(6) && natIp6 ? { natIp6 } : {}),
  }
}

/** The DPU NAT addresses a host's public IPs are announced via. */
export interface NatAddresses {
  readonly natIp?: string
  /** Set when the host's IPv6 leaves its group (NAT66). */
  readonly natIp6?: string
}

/**
 * Has the host's public IPs of `families` allocated and announced: its IPv4 (4) via its
 * DPU's NAT IP, its IPv6 (6) via its DPU's IPv6 NAT address (the handler reads both).
 */
export function addPublicIpAllocate(
  deps: Pick<HandlerDeps, 'children'>,
  host: string,
  specVersion: number,
  families: readonly (4 | 6)[],
  attempt = 1,
): Promise<ChildRef> {
  return deps.children.add(
    CONTROLLER_QUEUE,
    'publicip.allocate',
    { host, specVersion, families, ...(attempt > 1 ? { attempt } : {}) },
    { jobId: jobId('publicip.allocate', host, specVersion, attempt) },
  )
}

/** Has the host's public IPs (of `families`, default both) withdrawn and returned to the pool. */
export function addPublicIpRelease(
  deps: Pick<HandlerDeps, 'children'>,
  host: string,
  specVersion: number,
  families?: readonly (4 | 6)[],
): Promise<ChildRef> {
  return deps.children.add(
    CONTROLLER_QUEUE,
    'publicip.release',
    { host, specVersion, ...(families ? { families } : {}) },
    { jobId: releaseJobId(host, specVersion, families) },
  )
}

/**
 * A release of one family alone (an attach's, when IPv6 no longer leaves) is a job of its
 * own: a detach at the same spec version releases both, and must not find that job done.
 */
function releaseJobId(host: string, specVersion: number, families?: readonly (4 | 6)[]): string {
  const only = families?.length === 1 ? `-ipv${families[0]}` : ''
  return jobId('publicip.release', host, `${specVersion}${only}`)
}

/**
 * `publicip.release` when the host holds a public IP of one of `families` (default both),
 * else nothing: its addresses go back to their pools once FRR has withdrawn them.
 */
export async function releaseHeldPublicIps(
  deps: Pick<HandlerDeps, 'children' | 'ipam'>,
  host: { readonly name: string; readonly specVersion: number },
  families: readonly (4 | 6)[] = [4, 6],
): Promise<ChildRef[]> {
  const held = await Promise.all(families.map((f) => deps.ipam.publicIpOf(host.name, f)))
  if (held.every((ip) => ip === undefined)) return []
  const only = families.length < 2 ? families : undefined
  return [await addPublicIpRelease(deps, host.name, host.specVersion, only)]
}

/** The `publicip.allocate` result for the host at this spec version and attempt. */
export function publicIpAllocated(
  deps: Pick<HandlerDeps, 'children'>,
  host: string,
  specVersion: number,
  attempt = 1,
): Promise<Ack<PublicIpResult>> {
  return readAck(deps.children, PublicIpResult, {
    queue: CONTROLLER_QUEUE,
    jobId: jobId('publicip.allocate', host, specVersion, attempt),
  })
}

/**
 * The `publicip.release` result for the host at this spec version; `acked` (nothing to
 * wait for) when no release was asked for.
 */
export async function publicIpReleased(
  deps: Pick<HandlerDeps, 'children'>,
  host: { readonly name: string; readonly specVersion: number },
): Promise<Ack<PublicIpResult>> {
  const ref = {
    queue: CONTROLLER_QUEUE,
    jobId: releaseJobId(host.name, host.specVersion),
  }
  if ((await deps.children.outcome(ref)).state === 'missing') {
    return { state: 'acked', value: { host: host.name, publicIp: null, announced: false } }
  }
  return readAck(deps.children, PublicIpResult, ref)
}

/** Asks FRR to announce or withdraw `payload.publicIp` (its /32 or /128). */
export function addFrrChange(
  deps: Pick<HandlerDeps, 'children'>,
  name: FrrJobName,
  payload: FrrPayload,
  attempt = 1,
): Promise<ChildRef> {
  return deps.children.add(FRR_QUEUE, name, payload, {
    jobId: frrJobId(name, payload, attempt),
  })
}

/** FRR's ack for an announce or withdraw. */
export function frrAck(
  deps: Pick<HandlerDeps, 'children'>,
  name: FrrJobName,
  payload: Pick<FrrPayload, 'publicIp' | 'owner' | 'specVersion'>,
  attempt = 1,
): Promise<Ack<FrrAck>> {
  return readAck(deps.children, FrrAck, {
    queue: FRR_QUEUE,
    jobId: frrJobId(name, payload, attempt),
  })
}

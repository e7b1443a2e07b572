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
import type { HandlerDeps } from './deps.ts'
import { readAck } from './errors.ts'

type Parent = { id: string; queue: string }

/** Has the host's public IP allocated and announced via `natIp`. */
export async function addPublicIpAllocate(
  deps: Pick<HandlerDeps, 'children'>,
  parent: Parent,
  host: string,
  specVersion: number,
  natIp: string,
): Promise<void> {
  await deps.children.add(
    CONTROLLER_QUEUE,
    'publicip.allocate',
    { host, specVersion, natIp },
    { jobId: jobId('publicip.allocate', host, specVersion), parent },
  )
}

/** Has the host's public IP withdrawn and returned to the pool. */
export async function addPublicIpRelease(
  deps: Pick<HandlerDeps, 'children'>,
  parent: Parent,
  host: string,
  specVersion: number,
  natIp: string | undefined,
): Promise<void> {
  await deps.children.add(
    CONTROLLER_QUEUE,
    'publicip.release',
    { host, specVersion, ...(natIp ? { natIp } : {}) },
    { jobId: jobId('publicip.release', host, specVersion), parent },
  )
}

/** The `publicip.allocate` result for the host at this spec version, once it completed. */
export function publicIpAllocated(
  deps: Pick<HandlerDeps, 'children'>,
  host: string,
  specVersion: number,
): Promise<PublicIpResult | undefined> {
  return readAck(
    deps.children,
    PublicIpResult,
    CONTROLLER_QUEUE,
    jobId('publicip.allocate', host, specVersion),
  )
}

/** Asks FRR to announce or withdraw `payload.publicIp/32`. */
export async function addFrrChange(
  deps: Pick<HandlerDeps, 'children'>,
  parent: Parent,
  name: FrrJobName,
  payload: FrrPayload,
): Promise<void> {
  await deps.children.add(FRR_QUEUE, name, payload, { jobId: frrJobId(name, payload), parent })
}

/** FRR's ack for an announce or withdraw, once it completed. */
export function frrAck(
  deps: Pick<HandlerDeps, 'children'>,
  name: FrrJobName,
  payload: Pick<FrrPayload, 'publicIp' | 'owner' | 'specVersion'>,
): Promise<FrrAck | undefined> {
  return readAck(deps.children, FrrAck, FRR_QUEUE, frrJobId(name, payload))
}

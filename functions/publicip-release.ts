import type { Job } from 'bullmq'
import { FrrJobName } from '../lib/jobs/frr.ts'
import { PublicIpReleaseJob, type PublicIpResult } from '../lib/jobs/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { parentOf, parsePayload, stepOf, waitForChildren } from './internal/job.ts'
import { addFrrChange } from './internal/public-ip-jobs.ts'

/**
 * `publicip.release`: has FRR withdraw the host's `PublicIP/32` (child job; its result is
 * the ack that the prefix left the BGP table), then returns the address to the pool.
 * The NAT rule goes with the host's topology (host.detach applies the group without it).
 */
export function createPublicIpRelease(deps: Pick<HandlerDeps, 'ipam' | 'children'>) {
  return async function publicIpRelease(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, natIp } = parsePayload(PublicIpReleaseJob, job)
    const held = await deps.ipam.publicIpOf(name)
    if (stepOf(job) === 'converge' && held) {
      await addFrrChange(deps, parentOf(job), FrrJobName.withdraw, {
        publicIp: held,
        ...(natIp ? { nextHop: natIp } : {}),
        owner: name,
        specVersion,
      })
      await waitForChildren(job, token)
    }
    const released = await deps.ipam.releasePublicIp(name)
    return { host: name, publicIp: released ?? held ?? null, announced: false }
  }
}

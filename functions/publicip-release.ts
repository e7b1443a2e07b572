import { type Job, WaitingChildrenError } from 'bullmq'
import { FRR_QUEUE, FrrJobName, frrJobId } from '../lib/jobs/frr.ts'
import { PublicIpReleaseJob } from '../lib/jobs/index.ts'
import { type HandlerDeps, parentOf, parsePayload, stepOf } from './deps.ts'
import type { PublicIpResult } from './publicip-allocate.ts'

/**
 * `publicip.release`: has FRR withdraw the host's `PublicIP/32` (child job; its result is
 * the ack that the prefix left the BGP table), then returns the address to the pool.
 * The NAT rule goes with the host's topology (host.detach applies the group without it).
 */
export function createPublicIpRelease(deps: Pick<HandlerDeps, 'ipam' | 'children'>) {
  return async function publicIpRelease(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, natIp } = parsePayload(PublicIpReleaseJob, job)
    const held = (await deps.ipam.listPublicIps()).find((p) => p.allocatedTo === name)
    if (stepOf(job) === 'converge' && held) {
      const data = {
        publicIp: held.ip,
        ...(natIp ? { nextHop: natIp } : {}),
        owner: name,
        specVersion,
      }
      await deps.children.add(FRR_QUEUE, FrrJobName.withdraw, data, {
        jobId: frrJobId(FrrJobName.withdraw, data),
        parent: parentOf(job),
      })
      await job.updateData({ ...(job.data as object), step: 'await' })
      if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError()
    }
    const released = await deps.ipam.releasePublicIp(name)
    return { host: name, publicIp: released ?? held?.ip ?? null, announced: false }
  }
}

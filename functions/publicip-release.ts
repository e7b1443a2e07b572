import { type Job, UnrecoverableError } from 'bullmq'
import { FrrJobName } from '../lib/jobs/frr.ts'
import { PublicIpReleaseJob, type PublicIpResult } from '../lib/jobs/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { AwaitingAck } from './internal/errors.ts'
import { parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { addFrrChange, frrAck } from './internal/public-ip-jobs.ts'

/**
 * `publicip.release`: has FRR withdraw the host's `PublicIP/32` (child job; its result is
 * the ack that the prefix left the BGP table), then returns the address to the pool.
 * The NAT rule goes with the host's topology (host.detach applies the group without it).
 */
export function createPublicIpRelease(deps: Pick<HandlerDeps, 'ipam' | 'children'>) {
  return async function publicIpRelease(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, natIp } = parsePayload(PublicIpReleaseJob, job)
    const held = await deps.ipam.publicIpOf(name)
    if (stepOf(job) === 'converge') {
      if (!held) return { host: name, publicIp: null, announced: false }
      const withdraw = await addFrrChange(deps, FrrJobName.withdraw, {
        publicIp: held,
        ...(natIp ? { nextHop: natIp } : {}),
        owner: name,
        specVersion,
      })
      await waitForChildren(job, token, deps.children, [withdraw])
    } else {
      await stillWaiting(job, token, deps.children)
    }
    if (held) {
      const ack = await frrAck(deps, FrrJobName.withdraw, {
        publicIp: held,
        owner: name,
        specVersion,
      })
      // Still announced: the address must not go back to the pool for another host.
      if (ack.state === 'failed')
        throw new UnrecoverableError(`FRR did not withdraw ${held}: ${ack.reason}`)
      if (ack.state === 'pending')
        throw new AwaitingAck(`FRR has not acked the withdrawal of ${held}`)
    }
    const released = await deps.ipam.releasePublicIp(name)
    return { host: name, publicIp: released ?? held ?? null, announced: false }
  }
}

import { type Job, UnrecoverableError } from 'bullmq'
import { FrrJobName } from '../lib/jobs/frr.ts'
import { PublicIpReleaseJob, type PublicIpResult } from '../lib/jobs/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { AwaitingAck } from './internal/errors.ts'
import { parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { addFrrChange, frrAck } from './internal/public-ip-jobs.ts'

/**
 * `publicip.release`: has FRR withdraw the host's `PublicIP/32` and `PublicIPv6/128` (or
 * those of the payload's `families`) (child jobs; their results are the acks that the prefixes left the BGP table), then
 * returns the addresses to their pools. The NAT rules go with the host's topology
 * (host.detach applies the group without them).
 */
export function createPublicIpRelease(deps: Pick<HandlerDeps, 'ipam' | 'children' | 'store'>) {
  return async function publicIpRelease(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, families = [4, 6] } = parsePayload(PublicIpReleaseJob, job)
    // The next hops a withdrawal names (informational: FRR withdraws the prefix whatever
    // it went via) are the host's DPU's as the store has them; once the host is gone, none.
    const host = await deps.store.hosts.get(name)
    const held = [
      { ip: await deps.ipam.publicIpOf(name), nextHop: host?.spec.dpu.ips[1], family: 4 },
      { ip: await deps.ipam.publicIpOf(name, 6), nextHop: host?.spec.dpu.natIp6, family: 6 },
    ].flatMap(({ ip, nextHop, family }) =>
      ip && families.includes(family as 4 | 6) ? [{ ip, nextHop }] : [],
    )
    if (stepOf(job) === 'converge') {
      if (held.length === 0) return { host: name, publicIp: null, announced: false }
      const withdraws = []
      for (const { ip, nextHop } of held) {
        withdraws.push(
          await addFrrChange(deps, FrrJobName.withdraw, {
            publicIp: ip,
            ...(nextHop ? { nextHop } : {}),
            owner: name,
            specVersion,
          }),
        )
      }
      await waitForChildren(job, token, deps.children, withdraws)
    } else {
      await stillWaiting(job, token, deps.children)
    }
    for (const { ip } of held) {
      const ack = await frrAck(deps, FrrJobName.withdraw, {
        publicIp: ip,
        owner: name,
        specVersion,
      })
      // Still announced: the address must not go back to the pool for another host.
      if (ack.state === 'failed')
        throw new UnrecoverableError(`FRR did not withdraw ${ip}: ${ack.reason}`)
      if (ack.state === 'pending')
        throw new AwaitingAck(`FRR has not acked the withdrawal of ${ip}`)
    }
    const released = families.includes(4) ? await deps.ipam.releasePublicIp(name) : undefined
    const released6 = families.includes(6) ? await deps.ipam.releasePublicIp(name, 6) : undefined
    const held4 = held.find(({ ip }) => !ip.includes(':'))?.ip
    const held6 = held.find(({ ip }) => ip.includes(':'))?.ip
    return {
      host: name,
      publicIp: released ?? held4 ?? null,
      ...(released6 || held6 ? { publicIp6: released6 ?? held6 } : {}),
      announced: false,
    }
  }
}

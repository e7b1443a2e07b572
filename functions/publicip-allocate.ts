import { type Job, UnrecoverableError } from 'bullmq'
import { FrrJobName } from '../lib/jobs/frr.ts'
import { PublicIpJob, type PublicIpResult } from '../lib/jobs/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { AwaitingAck } from './internal/errors.ts'
import { GroupGone } from './internal/group-apply.ts'
import { parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { addFrrChange, frrAck } from './internal/public-ip-jobs.ts'

/**
 * `publicip.allocate`: takes a public IP from the operator's pool for a host (owner-keyed:
 * a retry gets the same one), adds its `dnat_and_snat` to the group topology, and has FRR
 * announce `PublicIP/32` via the host's DPU NAT IP (a child job on the FRR queue; its
 * result is the ack that FRR's BGP table shows the prefix).
 */
export function createPublicIpAllocate(deps: HandlerDeps) {
  return async function publicIpAllocate(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, natIp, attempt } = parsePayload(PublicIpJob, job)
    if (stepOf(job) === 'converge') {
      const host = await deps.store.getHost(name)
      if (!host || host.deletion) return { host: name, publicIp: null, announced: false }
      const publicIp = await deps.ipam.allocatePublicIp(name)
      const applied = await deps.groups
        .apply(host.spec.resourceGroup)
        .then(() => true)
        .catch((error: unknown) => {
          if (error instanceof GroupGone) return false
          throw error
        })
      if (!applied) return { host: name, publicIp: null, announced: false }
      const announce = await addFrrChange(
        deps,
        FrrJobName.announce,
        {
          publicIp,
          nextHop: natIp,
          owner: name,
          specVersion,
        },
        attempt,
      )
      await waitForChildren(job, token, deps.children, [announce])
    } else {
      await stillWaiting(job, token, deps.children)
    }
    const publicIp = await deps.ipam.publicIpOf(name)
    if (!publicIp) return { host: name, publicIp: null, announced: false }
    const ack = await frrAck(
      deps,
      FrrJobName.announce,
      { publicIp, owner: name, specVersion },
      attempt,
    )
    // FRR refused for good (a prefix an operator configured): this job fails with why,
    // and so does the host's attach that waits for it.
    if (ack.state === 'failed')
      throw new UnrecoverableError(`FRR did not announce ${publicIp}: ${ack.reason}`)
    if (ack.state === 'pending') throw new AwaitingAck(`FRR has not acked ${publicIp}/32 yet`)
    return { host: name, publicIp: ack.value.publicIp, announced: ack.value.announced }
  }
}

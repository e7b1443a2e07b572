import { type Job, WaitingChildrenError } from 'bullmq'
import { FRR_QUEUE, type FrrAck, FrrJobName, frrJobId } from '../lib/jobs/frr.ts'
import { PublicIpJob } from '../lib/jobs/index.ts'
import { type HandlerDeps, parentOf, parsePayload, stepOf } from './deps.ts'
import { applyGroup } from './group-state.ts'

export interface PublicIpResult {
  readonly host: string
  readonly publicIp: string | null
  readonly announced: boolean
}

/**
 * `publicip.allocate`: takes a public IP from the operator's pool for a host (owner-keyed:
 * a retry gets the same one), adds its `dnat_and_snat` to the group topology, and has FRR
 * announce `PublicIP/32` via the host's DPU NAT IP (a child job on the FRR queue; its
 * result is the ack that FRR's BGP table shows the prefix).
 */
export function createPublicIpAllocate(deps: HandlerDeps) {
  return async function publicIpAllocate(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, natIp } = parsePayload(PublicIpJob, job)
    if (stepOf(job) === 'converge') {
      const host = await deps.store.getHost(name)
      const group = host && (await deps.store.getGroup(host.spec.resourceGroup))
      if (!host || !group || host.deletion) return { host: name, publicIp: null, announced: false }
      const publicIp = await deps.ipam.allocatePublicIp(name)
      await applyGroup(deps, group)
      const data = { publicIp, nextHop: natIp, owner: name, specVersion }
      await deps.children.add(FRR_QUEUE, FrrJobName.announce, data, {
        jobId: frrJobId(FrrJobName.announce, data),
        parent: parentOf(job),
      })
      await job.updateData({ ...(job.data as object), step: 'await' })
      if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError()
    }
    // The announce child's ack, read from its own job (deterministic id).
    const held = (await deps.ipam.listPublicIps()).find((p) => p.allocatedTo === name)
    const data = { publicIp: held?.ip ?? '', nextHop: natIp, owner: name, specVersion }
    const ack = held
      ? ((await deps.children.result(FRR_QUEUE, frrJobId(FrrJobName.announce, data))) as
          | FrrAck
          | undefined)
      : undefined
    return { host: name, publicIp: ack?.publicIp ?? null, announced: ack?.announced === true }
  }
}

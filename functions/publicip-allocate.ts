import { type Job, UnrecoverableError } from 'bullmq'
import { FrrJobName } from '../lib/jobs/frr.ts'
import { PublicIpJob, type PublicIpResult } from '../lib/jobs/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { AwaitingAck } from './internal/errors.ts'
import { GroupGone } from './internal/group-apply.ts'
import { parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { addFrrChange, frrAck, natAddressesOf } from './internal/public-ip-jobs.ts'

/**
 * `publicip.allocate`: takes a public IP from the operator's pool for a host (owner-keyed:
 * a retry gets the same one), adds its `dnat_and_snat` to the group topology, and has FRR
 * announce `PublicIP/32` via the host's DPU NAT IP (a child job on the FRR queue; its
 * result is the ack that FRR's BGP table shows the prefix). With family 6 (the host's
 * IPv6 leaves its group), the same for a public IPv6 address: its NAT66 rule, and
 * `PublicIPv6/128` announced via the DPU's IPv6 NAT address. Both addresses are the host's
 * DPU's as the store has them, whatever the payload says (it names the host only).
 */
export function createPublicIpAllocate(deps: HandlerDeps) {
  return async function publicIpAllocate(job: Job, token?: string): Promise<PublicIpResult> {
    const { host: name, specVersion, families, attempt } = parsePayload(PublicIpJob, job)
    const none: PublicIpResult = { host: name, publicIp: null, announced: false }
    const v4 = families.includes(4)
    const v6 = families.includes(6)
    if (stepOf(job) === 'converge') {
      const host = await deps.store.hosts.get(name)
      if (!host || host.deletion) return none
      const nat = natAddressesOf(host, families)
      if (typeof nat === 'string') throw new UnrecoverableError(`publicip.allocate refused: ${nat}`)
      const { natIp, natIp6 } = nat
      const publicIp = natIp ? await deps.ipam.allocatePublicIp(name) : undefined
      const publicIp6 = natIp6 ? await deps.ipam.allocatePublicIp(name, 6) : undefined
      const applied = await deps.groups
        .apply(host.spec.resourceGroup)
        .then(() => true)
        .catch((error: unknown) => {
          if (error instanceof GroupGone) return false
          throw error
        })
      if (!applied) return none
      const announce = (ip: string, nextHop: string) =>
        addFrrChange(
          deps,
          FrrJobName.announce,
          { publicIp: ip, nextHop, owner: name, specVersion },
          attempt,
        )
      const children = []
      if (publicIp && natIp) children.push(await announce(publicIp, natIp))
      if (publicIp6 && natIp6) children.push(await announce(publicIp6, natIp6))
      await waitForChildren(job, token, deps.children, children)
    } else {
      await stillWaiting(job, token, deps.children)
    }
    const [publicIp, publicIp6] = await Promise.all([
      v4 ? deps.ipam.publicIpOf(name) : undefined,
      v6 ? deps.ipam.publicIpOf(name, 6) : undefined,
    ])
    if ((v4 && !publicIp) || (v6 && !publicIp6)) return none
    const announced = async (ip: string) => {
      const ack = await frrAck(
        deps,
        FrrJobName.announce,
        { publicIp: ip, owner: name, specVersion },
        attempt,
      )
      // FRR refused for good (a prefix an operator configured): this job fails with why,
      // and so does the host's attach that waits for it.
      if (ack.state === 'failed')
        throw new UnrecoverableError(`FRR did not announce ${ip}: ${ack.reason}`)
      if (ack.state === 'pending') throw new AwaitingAck(`FRR has not acked ${ip} yet`)
      return ack.value
    }
    const ack = publicIp ? await announced(publicIp) : undefined
    const ack6 = publicIp6 ? await announced(publicIp6) : undefined
    return {
      host: name,
      publicIp: ack?.publicIp ?? null,
      ...(ack6 ? { publicIp6: ack6.publicIp } : {}),
      announced: (ack?.announced ?? true) && (ack6?.announced ?? true),
    }
  }
}

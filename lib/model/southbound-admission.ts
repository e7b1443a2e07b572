/**
 * Where a group's Southbound admits its peers by address (a Kubernetes central's
 * NetworkPolicy, `HYDRAZINE_K8S_DPU_CIDRS`), a DPU's NAT addresses must stay outside
 * those CIDRs: every tenant host behind the DPU leaves the DPU from its NAT address
 * (SNAT), so a NAT address inside them would let any tenant host reach every group's SB —
 * over plaintext `tcp:` with no RBAC, the topology of every tenant. Pure: the caller
 * refuses what this finds.
 */
import { cidrContains, type DpuSpec } from './objects.ts'

export interface AdmittedNatIp {
  /** `fabricIps[1]` (the NAT IP) or `natIp6`. */
  readonly field: 'fabricIps[1]' | 'natIp6'
  readonly ip: string
  /** The admitted CIDR that holds it. */
  readonly cidr: string
}

/** The DPU's NAT addresses that lie inside one of `cidrs`, each with the CIDR holding it. */
export function natIpsAdmitted(
  spec: Pick<DpuSpec, 'fabricIps' | 'natIp6'>,
  cidrs: readonly string[],
): AdmittedNatIp[] {
  const nat: [AdmittedNatIp['field'], string | undefined][] = [
    ['fabricIps[1]', spec.fabricIps[1]],
    ['natIp6', spec.natIp6],
  ]
  const found: AdmittedNatIp[] = []
  for (const [field, ip] of nat) {
    if (ip === undefined) continue
    const cidr = cidrs.find((c) => cidrContains(c, ip))
    if (cidr !== undefined) found.push({ field, ip, cidr })
  }
  return found
}

/** What a refusal says about one admitted NAT address. */
export function admittedNatIpMessage({ ip, cidr }: AdmittedNatIp): string {
  return (
    `NAT address ${ip} is inside ${cidr}, which HYDRAZINE_K8S_DPU_CIDRS admits to every ` +
    "group's Southbound: the DPU's tenant hosts leave from it and would reach those " +
    'Southbounds; give the DPU a NAT address outside HYDRAZINE_K8S_DPU_CIDRS, or narrow ' +
    "them to the DPUs' encap addresses"
  )
}

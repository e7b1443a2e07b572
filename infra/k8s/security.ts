/**
 * The security settings every generated pod starts from: Kubernetes' "restricted" Pod
 * Security Standard (non-root, no privilege escalation, no capabilities, the runtime's
 * seccomp profile, a read-only root filesystem). The DPU agent is the one exception, and
 * says why (infra/k8s/agent.ts).
 */
import type { IPodSecurityContext } from 'kubernetes-models/v1/PodSecurityContext'
import type { ISecurityContext } from 'kubernetes-models/v1/SecurityContext'

/** The user and group Hydrazine's image runs as (infra/k8s/Containerfile creates them). */
export const RUN_AS = { uid: 10001, gid: 10001 } as const

export function restrictedPod(): { securityContext: IPodSecurityContext } {
  return {
    securityContext: {
      runAsNonRoot: true,
      runAsUser: RUN_AS.uid,
      runAsGroup: RUN_AS.gid,
      // Volumes (a central's database, the FRR socket directory) are the group's.
      fsGroup: RUN_AS.gid,
      seccompProfile: { type: 'RuntimeDefault' },
    },
  }
}

export function restrictedContainer(): ISecurityContext {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
  }
}

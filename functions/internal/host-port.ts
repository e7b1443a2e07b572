/**
 * The DPU-side interface of a host (a representor; a veth end in the lab), when the
 * ManagedResource's `identifier` names one (a Linux interface name, at most 15 chars).
 */
export function hostPortOf(spec: { identifier?: string | undefined }): string | undefined {
  const id = spec.identifier
  return id && /^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$/.test(id) ? id : undefined
}

/** `{ hostPort }` when the spec names one, else `{}` — for spreading into payloads. */
export function optionalHostPort(spec: { identifier?: string | undefined }): { hostPort?: string } {
  const hostPort = hostPortOf(spec)
  return hostPort ? { hostPort } : {}
}

/**
 * The DPU-side interface of a host (a representor; a veth end in the lab): the host port
 * its placement chose from the DPU's inventory (`identifier`). Absent only when the
 * inventory names none: the agent then uses its own default port.
 *
 * @example { ...optionalHostPort(host.spec) } // { hostPort: 'pf0hpf' } or {}
 */
export function optionalHostPort(spec: { identifier?: string | undefined }): { hostPort?: string } {
  return spec.identifier ? { hostPort: spec.identifier } : {}
}

/**
 * The fields every protocol version's jobs and acks are made of (Overlay `./index.ts`,
 * Fabric `./fabric.ts`): one definition each, so that a bound or a pattern cannot differ
 * between them.
 */
import * as v from 'valibot'

/** A group's or a host's name. */
export const name = v.pipe(v.string(), v.minLength(1, 'must not be empty'), v.maxLength(253))
/** DPU ids end up in queue names, Redis keys and OVS `system-id`. */
export const DpuId = v.pipe(
  v.string(),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'must be 1-63 of A-Z a-z 0-9 . _ - (no ":")'),
)
export const mac = v.pipe(
  v.string(),
  v.regex(/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, 'must be a lower-case MAC like 0a:00:00:00:00:01'),
)
/** A Linux interface name: at most 15 characters, no '/', ':' or spaces. */
export const InterfaceName = v.pipe(
  v.string(),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$/, 'must be a Linux interface name (max 15 chars)'),
)
export const specVersion = v.pipe(v.number(), v.integer(), v.minValue(0))

/**
 * What an agent reports is its own to choose and the controller reads it: every string and
 * list of it is bounded. A DPU holds at most 256 host ports (the inventory's bound).
 */
export const reported = v.pipe(v.string(), v.maxLength(253))
export const reportedList = <T extends v.GenericSchema>(item: T, max: number) =>
  v.pipe(v.array(item), v.maxLength(max, `must list at most ${max}`))
export const MAX_REPORTED_PORTS = 256

/**
 * The operator's settings for groups' network implementations:
 *
 * - `HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION` (`Overlay` | `Fabric`, default `Overlay`):
 *   what a group gets when its request leaves `networkImplementationType` out.
 * - `HYDRAZINE_FABRIC_VNIS` (default `10000-19999`, within 1-16777215): the VNIs Fabric
 *   groups take theirs from, one each.
 * - `HYDRAZINE_FABRIC_VLANS` (default `100-3999`, within 1-4094): the VLAN ids, one each.
 * - `HYDRAZINE_FABRIC_ASN` (no default, 1-4294967295): the fabric's BGP AS number, which
 *   the DPUs' FRR speak EVPN in and which makes each group's route target (`ASN:VNI`).
 *   Unset, no DPU is configured for a Fabric group: it reports Failed
 *   (`FABRIC_NOT_AVAILABLE`).
 *
 * A range is `first-last` (both included) or one number.
 *
 * @example HYDRAZINE_FABRIC_VNIS=20000-20999  // at most 1,000 Fabric groups
 */
import * as v from 'valibot'
import type { FabricRanges, IdRange } from '../ipam/index.ts'
import {
  NETWORK_IMPLEMENTATION_TYPES,
  type NetworkImplementationType,
} from '../model/network-implementation.ts'

/** What `loadConfig` makes of the three variables. */
export interface NetworkImplementationConfig {
  /** `HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION`: a group's type when its request gives none. */
  readonly defaultType: NetworkImplementationType
  /** `HYDRAZINE_FABRIC_VNIS`, `HYDRAZINE_FABRIC_VLANS`: the Fabric groups' id pools. */
  readonly fabricRanges: FabricRanges
  /** `HYDRAZINE_FABRIC_ASN`: the fabric's AS; absent, Fabric groups cannot be built. */
  readonly fabricAsn?: number
}

/** A `first-last` range of ids within `min`..`max`, as the setting `name` gives it. */
function idRange(name: string, min: number, max: number, fallback: string) {
  const bounds = `${min}-${max}`
  return v.optional(
    v.pipe(
      v.string(),
      v.trim(),
      v.regex(
        /^\d{1,9}(-\d{1,9})?$/,
        `must be a range first-last (e.g. ${fallback}) or one number`,
      ),
      v.transform((s): IdRange => {
        const [first = 0, last = first] = s.split('-').map(Number)
        return { first, last, setting: name }
      }),
      v.check((r) => r.first >= min && r.last <= max, `must lie within ${bounds}`),
      v.check((r) => r.first <= r.last, 'must not end before it starts'),
    ),
    fallback,
  )
}

export const NetworkTypeVariables = {
  HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION: v.optional(
    v.picklist(NETWORK_IMPLEMENTATION_TYPES, 'must be Overlay or Fabric'),
    'Overlay',
  ),
  HYDRAZINE_FABRIC_VNIS: idRange('HYDRAZINE_FABRIC_VNIS', 1, 16_777_215, '10000-19999'),
  HYDRAZINE_FABRIC_VLANS: idRange('HYDRAZINE_FABRIC_VLANS', 1, 4094, '100-3999'),
  HYDRAZINE_FABRIC_ASN: v.optional(
    v.pipe(
      v.string(),
      v.trim(),
      v.regex(/^\d{1,10}$/, 'must be a BGP AS number (1-4294967295)'),
      v.transform(Number),
      v.check((n) => n >= 1 && n <= 4_294_967_295, 'must be a BGP AS number (1-4294967295)'),
    ),
  ),
}

/** The parsed variables as `Config.networkImplementation`. */
export function networkTypeConfig(c: {
  readonly HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION: NetworkImplementationType
  readonly HYDRAZINE_FABRIC_VNIS: IdRange
  readonly HYDRAZINE_FABRIC_VLANS: IdRange
  readonly HYDRAZINE_FABRIC_ASN?: number | undefined
}): NetworkImplementationConfig {
  return {
    defaultType: c.HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION,
    fabricRanges: { vnis: c.HYDRAZINE_FABRIC_VNIS, vlans: c.HYDRAZINE_FABRIC_VLANS },
    ...(c.HYDRAZINE_FABRIC_ASN !== undefined ? { fabricAsn: c.HYDRAZINE_FABRIC_ASN } : {}),
  }
}

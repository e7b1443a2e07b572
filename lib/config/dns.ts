/**
 * `HYDRAZINE_DNS_ZONE` (default `hydrazine.internal`): the zone every group's DNS domain
 * lives in. Each host of group `g` resolves as `<hostname>.g.<zone>` inside `g` only (OVN's
 * native DNS on the group's switch); `off` gives no group DNS records at all.
 *
 * A DNS name of lowercase labels (letters, digits, `-`; a trailing dot and capitals are
 * accepted and dropped), at most 125 characters: a host and a group name (63 each) and
 * the zone must fit DNS's 253.
 *
 * @example HYDRAZINE_DNS_ZONE=cloud.example.internal  // web.group-a.cloud.example.internal
 */
import * as v from 'valibot'

export const DEFAULT_DNS_ZONE = 'hydrazine.internal'

/** The longest zone under which every `<63-char host>.<63-char group>.` name still fits. */
export const MAX_DNS_ZONE_LENGTH = 253 - 2 * 64

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/

export const DnsZoneVariable = v.optional(
  v.pipe(
    v.string(),
    v.transform((s) => s.trim().toLowerCase().replace(/\.$/, '')),
    v.check(
      (s) => s === 'off' || s.split('.').every((label) => LABEL.test(label)),
      'must be a DNS name of labels of letters, digits and - (at most 63 each, no - at either end), e.g. hydrazine.internal; or off',
    ),
    v.maxLength(MAX_DNS_ZONE_LENGTH, `must be at most ${MAX_DNS_ZONE_LENGTH} characters`),
    v.transform((s) => (s === 'off' ? undefined : s)),
  ),
  DEFAULT_DNS_ZONE,
)

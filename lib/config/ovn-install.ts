/**
 * `HYDRAZINE_OVN_INSTALL` and `HYDRAZINE_DEBIAN_MIRROR`: which OVN the embedded centrals
 * (the shared one and every per-group one) run.
 *
 * - `system` (default): the system's `ovn-central`, Debian 12's OVN 23.03 in /usr/bin.
 * - `debian-13`: Debian 13's OVN 25.03, from a root `mmdebstrap` makes once under
 *   `<HYDRAZINE_DATA_DIR>/ovn-installs/debian-13`, from `HYDRAZINE_DEBIAN_MIRROR`
 *   (default: the Debian mirror apt uses here).
 * - An absolute path: the OVN install under it (`usr/bin/ovn-northd` or `bin/ovn-northd`,
 *   `usr/share/ovn/ovn-nb.ovsschema` or `share/ovn/…`), checked at start-up.
 *
 * @example
 * HYDRAZINE_OVN_INSTALL=debian-13 npm start
 */
import * as v from 'valibot'
import { type OvnInstallChoice, OvnInstallInvalid, ovnInstallAt } from '../ovn/install.ts'

const CHOICE = 'must be system, debian-13 or the absolute path of an OVN install root'

export const OvnInstallVariable = v.optional(
  v.pipe(
    v.string(),
    v.check((s) => s === 'system' || s === 'debian-13' || s.startsWith('/'), CHOICE),
  ),
  'system',
)

export const DebianMirrorVariable = v.optional(
  v.pipe(
    v.string(),
    v.regex(
      /^https?:\/\/[^\s/]+(\/\S*)?$/,
      'must be an http:// or https:// URL of a Debian archive',
    ),
  ),
)

/**
 * The choice its two variables name, or the variable that is wrong and why. Only embedded
 * centrals run an OVN of Hydrazine's choosing: with an external or Kubernetes central,
 * anything but `system` is a mistake; a mirror is only for `debian-13`.
 */
export function ovnInstallConfig(
  install: string,
  mirror: string | undefined,
  embedded: { readonly ok: boolean; readonly why: string },
): { ok: true; choice: OvnInstallChoice } | { ok: false; path: string; message: string } {
  if (install !== 'system' && !embedded.ok) {
    return {
      ok: false,
      path: 'HYDRAZINE_OVN_INSTALL',
      message: `chooses the OVN of embedded centrals, and there is none: ${embedded.why}`,
    }
  }
  if (mirror !== undefined && install !== 'debian-13') {
    return {
      ok: false,
      path: 'HYDRAZINE_DEBIAN_MIRROR',
      message: `is where the debian-13 OVN root comes from: only with HYDRAZINE_OVN_INSTALL=debian-13, not ${install}`,
    }
  }
  if (install === 'system') return { ok: true, choice: { kind: 'system' } }
  if (install === 'debian-13') return { ok: true, choice: { kind: 'debian-13', mirror } }
  try {
    ovnInstallAt(install)
  } catch (error) {
    if (!(error instanceof OvnInstallInvalid)) throw error
    return { ok: false, path: 'HYDRAZINE_OVN_INSTALL', message: error.message }
  }
  return { ok: true, choice: { kind: 'root', root: install } }
}

/**
 * Which ports the agent may make or change on its DPU: a pure decision over what the
 * local OVS database holds, taken before anything is written.
 *
 * The rule: the agent creates a port that does not exist, and converges the settings of
 * a port that is already its own, for the same owner. It never moves a port from one
 * bridge to another (`p0` in `br-phy` stays there), never takes over a port it did not
 * make (no `hydrazine:role`, or another role), and never changes whose a port is: the
 * external_ids that name its owner (a host port's `iface-id`, a relay port's group) are
 * never rewritten. What the caller does with a refusal is its own (see `agent.ts`).
 */

/** A port (or interface) of that name as the database holds it. */
export interface ExistingPort {
  readonly name: string
  /** The bridge holding it; null when none does. */
  readonly bridge: string | null
  /** `hydrazine:role` of its interface (else of its port); absent when Hydrazine did not make it. */
  readonly role: string | undefined
  /** external_ids of its interface (else of its port). */
  readonly externalIds: Readonly<Record<string, string>>
}

/** The port the agent wants. */
export interface PortClaim {
  readonly name: string
  readonly bridge: string
  /** Its `hydrazine:role`. */
  readonly role: string
  /** The external_ids that say whose it is (e.g. `iface-id`): an existing port must match. */
  readonly owner: Readonly<Record<string, string>>
}

export type Claim =
  /** No such port: make it. */
  | { readonly verdict: 'create' }
  /** Already the agent's, same role and owner: converge its other settings. */
  | { readonly verdict: 'keep' }
  /** A port of another bridge: never moved. */
  | { readonly verdict: 'other-bridge'; readonly existing: ExistingPort }
  /** On the right bridge, but not made by Hydrazine for this role: never taken over. */
  | { readonly verdict: 'not-ours'; readonly existing: ExistingPort }
  /** The agent's, for this role, but another owner's (`key` holds `holder`): never rebound. */
  | {
      readonly verdict: 'other-owner'
      readonly existing: ExistingPort
      readonly key: string
      readonly holder: string
    }

/**
 * Decides whether the agent may make `want` hold, given the port of that name (if any).
 *
 * @example
 * claimPort({ name: 'p0', bridge: 'br-phy', role: undefined, externalIds: {} },
 *   { name: 'p0', bridge: 'br-int', role: 'host', owner: { 'iface-id': 'lp1' } })
 * // { verdict: 'other-bridge', existing: … }
 */
export function claimPort(existing: ExistingPort | undefined, want: PortClaim): Claim {
  if (!existing) return { verdict: 'create' }
  if (existing.bridge !== want.bridge) return { verdict: 'other-bridge', existing }
  if (existing.role !== want.role) return { verdict: 'not-ours', existing }
  for (const [key, value] of Object.entries(want.owner)) {
    const holder = existing.externalIds[key] ?? ''
    if (holder !== value) return { verdict: 'other-owner', existing, key, holder }
  }
  return { verdict: 'keep' }
}

/** The verdicts that let the agent write. */
export type Granted = Extract<Claim, { verdict: 'create' | 'keep' }>
/** The verdicts that refuse, naming the port that stands in the way. */
export type Refusal = Exclude<Claim, Granted>

/** True when the claim lets the agent write. */
export function granted(claim: Claim): claim is Granted {
  return claim.verdict === 'create' || claim.verdict === 'keep'
}

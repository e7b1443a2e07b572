/**
 * A group's DHCP relay ports: one logical switch port per relay on the group's switch,
 * bound on its DPU, with its MAC and address when it has them. Pure.
 */
import type { GroupContext, PartDraft } from './context.ts'
import { InvalidTopologySpec } from './errors.ts'
import { DPU_KEY, ROLE_KEY, ROLES } from './names.ts'
import type { DhcpRelayPort } from './spec.ts'

/**
 * A DHCP relay's port; without its address (named in the draft's problems) when that
 * address has no MAC or lies in none of the group's subnets.
 */
export function relayRows(ctx: GroupContext, draft: PartDraft, r: DhcpRelayPort): void {
  const { g, b, lsKey, problem } = ctx
  let ip = r.ip
  if (ip !== undefined && (!r.mac || !ctx.subnetOf(ip))) {
    const message = `relay ${r.portName} address ${ip} needs a MAC and must be in one of the group's subnets; the port has no address`
    problem(draft, new InvalidTopologySpec(g, message))
    ip = undefined
  }
  b.lsp(
    draft.rows,
    lsKey,
    r.portName,
    {
      addresses: [r.mac && ip ? `${r.mac} ${ip}` : (r.mac ?? 'unknown')],
      options: { 'requested-chassis': r.dpuId },
    },
    { [DPU_KEY]: r.dpuId, [ROLE_KEY]: ROLES.dhcpRelay },
  )
}

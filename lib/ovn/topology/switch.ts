/**
 * The group's distributed switch (its tenant network) and each host's port on it, locked
 * to the host's MAC and addresses and bound on its own DPU only. Pure.
 */
import { isIP } from 'node:net'
import { inSubnet } from './addresses.ts'
import type { Draft, GroupContext } from './context.ts'
import { InvalidTopologySpec, Ipv6NatUnsupported } from './errors.ts'
import { DPU_KEY, HOST_KEY, topologyNames as names } from './names.ts'
import type { DesiredRow } from './rows.ts'
import type { GroupMember } from './spec.ts'

/** The group's distributed switch, `hz/<group>/ls`. */
export function switchRows({ g, b, lsKey }: GroupContext): DesiredRow[] {
  const rows: DesiredRow[] = []
  b.ls(rows, lsKey, names.switch(g))
  return rows
}

/**
 * A host's port, locked to its MAC and address; left out (`draft.omitted`) when no subnet
 * holds it. A host that asks for NAT it cannot have, or an `ip6` outside `network6`, gets
 * its port without it, named in the draft's problems.
 */
export function hostPortRows(ctx: GroupContext, draft: Draft, m: GroupMember): void {
  const { g, b, spec, lsKey, subnets, problem } = ctx
  const subnet = ctx.subnetOf(m.ip)
  if (!subnet) {
    draft.omitted = true
    const cidrs = subnets.map((s) => s.cidr).join(', ')
    const message = `host ${m.hostName} address ${m.ip} is in none of the group's subnets (${cidrs}); it is left out`
    problem(draft, new InvalidTopologySpec(g, message), m.hostName)
    return
  }
  if (
    m.access !== 'None' &&
    !ctx.leavesGroup(m.ip) &&
    !(isIP(m.ip) === 6 && ctx.leavesGroup6(m.ip))
  ) {
    const error =
      isIP(m.ip) === 4
        ? new InvalidTopologySpec(
            g,
            `host ${m.hostName} has ${m.access}, but its subnet ${subnet.cidr} has no gateway: it gets no NAT`,
          )
        : new Ipv6NatUnsupported(g, m.hostName, m.access)
    problem(draft, error, m.hostName)
  }
  let ip6 = m.ip6
  if (ip6 !== undefined && !(spec.network6 && inSubnet(ip6, spec.network6.cidr))) {
    const where = spec.network6
      ? `not in network6 ${spec.network6.cidr}`
      : 'but the group has no network6'
    const message = `host ${m.hostName} IPv6 address ${ip6} is ${where}; its port has its other address only`
    problem(draft, new InvalidTopologySpec(g, message), m.hostName)
    ip6 = undefined
  }
  const addresses = `${m.mac} ${m.ip}${ip6 ? ` ${ip6}` : ''}`
  b.lsp(
    draft.rows,
    lsKey,
    m.logicalPort,
    {
      addresses: [addresses],
      port_security: [addresses],
      // Bound on its own DPU only: a port left behind elsewhere (a forced detach) with
      // the same iface-id never claims it.
      options: { 'requested-chassis': m.dpu.id },
    },
    { [HOST_KEY]: m.hostName, [DPU_KEY]: m.dpu.id },
  )
}

/**
 * `HYDRAZINE_ADMIN_NETWORK` (JSON; unset: no admin network): the provider's admin network,
 * the one every host port no tenant host holds sits on (docs/networks.md#the-admin-network).
 * Hydrazine creates and owns the group it names: no tenant may see, change, delete or
 * attach to it. `dhcpServer` is the provisioning server its DPUs relay DHCP to: one of
 * `HYDRAZINE_DHCP_SERVERS`.
 *
 * @example
 * HYDRAZINE_ADMIN_NETWORK='{"group": "admin", "network": {"cidr": "10.99.0.0/24", "gateway": "10.99.0.1"}, "dhcpServer": "172.18.0.50"}'
 */
import * as v from 'valibot'
import { AdminNetwork } from '../model/admin-network.ts'

const SHAPE = '{"group": NAME, "network": {"cidr", "gateway"}, "dhcpServer"?: IPv4}'

export type { AdminNetwork }

/**
 * The admin network a `HYDRAZINE_ADMIN_NETWORK` text names, or every problem with it, each
 * saying where (`network.gateway: gateway must lie inside the network`).
 */
export function parseAdminNetwork(
  text: string,
): { ok: true; value: AdminNetwork } | { ok: false; message: string } {
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch {
    return { ok: false, message: `is not valid JSON: ${SHAPE}` }
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return { ok: false, message: `must be a JSON object: ${SHAPE}` }
  }
  const parsed = v.safeParse(AdminNetwork, data)
  if (parsed.success) return { ok: true, value: parsed.output }
  const message = parsed.issues
    .map((issue) => {
      const path = v.getDotPath(issue)
      return path ? `${path}: ${issue.message}` : `${issue.message} (${SHAPE})`
    })
    .join('; ')
  return { ok: false, message }
}

/** The variable as the environment schema reads it: JSON text, checked by `parseAdminNetwork`. */
export const AdminNetworkVariable = v.optional(
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const parsed = parseAdminNetwork(dataset.value)
      if (parsed.ok) return parsed.value
      addIssue({ message: parsed.message })
      return NEVER
    }),
  ),
)

/** Why the admin network's `dhcpServer` cannot be relayed to: not one of `HYDRAZINE_DHCP_SERVERS`. */
export function adminRelayIssue(
  admin: AdminNetwork | undefined,
  dhcpServers: readonly string[],
): string | undefined {
  if (admin?.dhcpServer === undefined || dhcpServers.includes(admin.dhcpServer)) return undefined
  return `dhcpServer: ${admin.dhcpServer} must be one of HYDRAZINE_DHCP_SERVERS (${dhcpServers.join(', ') || 'none set'})`
}

/**
 * A central's `NB_Global.ipsec` changed (`HYDRAZINE_GENEVE_IPSEC` turned on or off, seen
 * when the controller first connects to it after a start): its DPUs' ovn-controller turn
 * every tunnel into an IPsec one, or back, at once, while each DPU gets (or drops) its
 * IPsec certificate only with a `configure`. Each DPU serving a host of the central's
 * groups is sent one now — through a re-drive of one of its hosts there (`Configuring`,
 * its port left as it is) — so that its tunnels do not wait for its next change.
 */
import { redriveHost } from '../../lib/jobs/redrive.ts'
import type { HandlerDeps } from './deps.ts'

/**
 * Re-drives, per DPU, the first Ready host (by name) of `groups` on it. A host on its way
 * (attaching, configuring) is left alone: this controller's `configure` of it carries the
 * setting already. Returns the hosts re-driven.
 *
 * @example await reconfigureForGeneveIpsec(deps, ['group-a'], true) // ['h1', 'h3']
 */
export async function reconfigureForGeneveIpsec(
  deps: Pick<HandlerDeps, 'store' | 'jobs'>,
  groups: readonly string[],
  on: boolean,
): Promise<string[]> {
  const redriven: string[] = []
  const dpus = new Set<string>()
  for (const group of groups) {
    const hosts = (await deps.store.hosts.inGroup(group))
      .filter((h) => !h.deletion && h.status.phase === 'Ready')
      .sort((a, b) => a.name.localeCompare(b.name))
    for (const host of hosts) {
      if (dpus.has(host.spec.dpu.id)) continue
      const cause = {
        type: 'AgentConfigured',
        status: 'Unknown',
        reason: on ? 'GeneveIpsecOn' : 'GeneveIpsecOff',
        message: `the Geneve tunnels of group ${group} ${on ? 'are now' : 'are no longer'} IPsec: DPU ${host.spec.dpu.id} is configured again`,
      } as const
      if (await redriveHost(deps, host.name, cause, 'Configuring')) {
        dpus.add(host.spec.dpu.id)
        redriven.push(host.name)
      }
    }
  }
  return redriven
}

/**
 * What a network plugin that enforces NetworkPolicy lets through to a central's pods, for
 * the tests (no cluster runs where they run): ingress rules with `ipBlock` and
 * `podSelector` peers and TCP ports, as the centrals' policies (infra/k8s/ovn-central.ts)
 * use them.
 */
import IPCIDR from 'ip-cidr'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'

/** Where a connection comes from: an address, or one of this central's own pods. */
export type Source = { ip: string } | 'central pod'

/**
 * Whether the policy lets `source` connect to `port` of the pods it selects.
 *
 * @example admits(policy, { ip: '10.0.0.11' }, 6641) // true: a controller node reaches the NB
 */
export function admits(policy: INetworkPolicy, source: Source, port: number): boolean {
  const podLabels = policy.spec?.podSelector.matchLabels ?? {}
  return (policy.spec?.ingress ?? []).some((rule) => {
    if (rule.ports && !rule.ports.some((p) => p.port === port && p.protocol === 'TCP')) return false
    if (rule.from === undefined) return true
    return rule.from.some((peer) => {
      if (source === 'central pod') {
        const wanted = peer.podSelector?.matchLabels
        return wanted !== undefined && Object.entries(wanted).every(([k, v]) => podLabels[k] === v)
      }
      const cidr = peer.ipBlock?.cidr
      if (cidr === undefined) return false
      const sameFamily = cidr.includes(':') === source.ip.includes(':')
      return sameFamily && new IPCIDR(cidr).contains(source.ip)
    })
  })
}

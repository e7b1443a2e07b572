/** Fabric facts every gateway router needs: its reserved fabric address and the next hops. */
export interface FabricSettings {
  /** Reserved address with prefix on each gateway router's fabric port, e.g. `172.18.0.254/24`. */
  readonly dummyIp: string
  /** Fabric next hop for traffic leaving the gateway routers. */
  readonly gateway?: string
  /**
   * Reserved IPv6 address with prefix on each gateway router's fabric port; set, hosts'
   * IPv6 leaves their group through NAT66 on their DPU (unset: IPv6 stays inside).
   */
  readonly dummyIp6?: string
  /** Fabric IPv6 next hop for traffic leaving the gateway routers. */
  readonly gateway6?: string
  /** The DPUs' bridge mapping name for localnet ports. */
  readonly physicalNetwork: string
}

/**
 * What the embedded local stack hands back once every daemon answers.
 * See `startLocalStack` in `./stack.ts`.
 */
export interface LocalStack {
  /** The directory every daemon keeps its files in. */
  readonly dataDir: string
  /** Present when Redis was started. `url` is `redis://127.0.0.1:<port>`. */
  readonly redis?: { readonly url: string; readonly port: number }
  /** Present when an OVN central (NB + SB ovsdb-server and ovn-northd) was started. */
  readonly ovn?: OvnCentral
  /** Present when FRR (zebra, bgpd, staticd) was started. */
  readonly frr?: FrrInstance
  /** Stops every daemon this stack started; safe to call more than once. */
  stop(): Promise<void>
  /**
   * Resolves with the first daemon that exits while the stack is up (a crash), so a
   * supervisor can fail loudly instead of limping on.
   */
  readonly crashed: Promise<DaemonExit>
}

export interface OvnCentral {
  /** OVSDB remotes for the NB database: `unix:/…/nb.sock` and `tcp:IP:PORT`. */
  readonly nb: { readonly unix: string; readonly tcp: string }
  /** OVSDB remotes for the SB database; `tcp` is what remote chassis use as `ovn-remote`. */
  readonly sb: { readonly unix: string; readonly tcp: string }
  /** Directory holding the central's sockets, pid and log files (use as OVN_RUNDIR). */
  readonly runDir: string
}

export interface FrrInstance {
  /** Directory of the daemons' vty sockets: `vtysh --vty_socket <vtyDir>`. */
  readonly vtyDir: string
  /** TCP port bgpd listens on (127.0.0.1 unless configured). */
  readonly bgpPort: number
  /** Path of the configuration file bgpd was started with. */
  readonly bgpdConfig: string
}

export interface DaemonExit {
  readonly name: string
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** The last lines of the daemon's log, to say why. */
  readonly logTail: string
}

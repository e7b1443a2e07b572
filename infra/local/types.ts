import type { CertificateAuthority } from '../../lib/pki/index.ts'
import type { RedisEndpoint } from '../../lib/redis/connection.ts'

/**
 * What the embedded local stack hands back once every daemon answers.
 * See `startLocalStack` in `./stack.ts`.
 */
export interface LocalStack {
  /** The directory every daemon keeps its files in. */
  readonly dataDir: string
  /**
   * The stack's certificate authority (`<dataDir>/pki/`): it signed the Redis and SB
   * server certificates; issue DPU client certificates from it (CN = the chassis name).
   */
  readonly pki: CertificateAuthority
  /** Present when Redis was started: the control plane's store. */
  readonly redis?: LocalRedis
  /** Present when the agents' Redis was started: the DPU agents' queues and heartbeats. */
  readonly agentsRedis?: LocalRedis
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

/**
 * The embedded Redis: a `RedisEndpoint` (give it to `redisOptions` / `createRedis`) and
 * the files behind it. The `default` user always has a password; `url` carries it.
 */
export interface LocalRedis extends RedisEndpoint {
  /**
   * `redis://default:PASSWORD@127.0.0.1:PORT` on loopback; `rediss://default:PASSWORD@ADDR:PORT` (TLS
   * only, no plaintext port) on any other address. Secret: never log it.
   */
  readonly url: string
  readonly host: string
  readonly port: number
  readonly tls: boolean
  /** With `tls`: the CA file clients must trust (the stack's `pki.caFile`). */
  readonly caFile?: string
  /**
   * The agents' Redis with `tls` requires a client certificate: the controller's, from the
   * stack's CA (CN `hydrazine-controller`).
   */
  readonly certFile?: string
  readonly keyFile?: string
  /** The `default` user's password, mode 0600, reused on every start. */
  readonly passwordFile: string
  /** Redis's `aclfile`: users added with `ACL SETUSER` + `ACL SAVE` survive restarts. */
  readonly aclFile: string
}

export interface OvnCentral {
  /** The NB database, for the controller on this machine only: its unix socket. */
  readonly nb: { readonly unix: string }
  /**
   * The SB database: `unix` for local tools, `remote` for chassis (`ovn-remote`). On
   * loopback `remote` is `tcp:127.0.0.1:PORT`; elsewhere `ssl:ADDR:PORT`, where a client
   * needs a certificate from `pki` and gets OVN's `ovn-controller` RBAC role.
   */
  readonly sb: { readonly unix: string; readonly remote: string }
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
